"""Embedded mode as `make run` starts it, for end-to-end tests: nothing configured (SQLite and
the file object store under the test's own var/, no broker, no signing key), the set-up
commands, then `manage.py serve` with all its children. The test talks to it over HTTP only."""

import json
import os
import subprocess
import urllib.error
import urllib.request
from contextlib import contextmanager

from tests.e2e.processes import PYTHON, ROOT, Processes, wait_until

# What a fresh clone does not have: no database, broker, store or signing key.
UNSET = frozenset({"DATABASE_URL", "REDIS_URL", "OBJECT_STORE_URL", "SECRET_KEY", "PUBLIC_BASE_URL", "ALLOWED_HOSTS"})


def embedded_env(tmp_path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return env | {"SCHEDULER_VAR_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO", **extra}


def manage(env: dict, *args: str) -> str:
    """The stdout of one management command, run to completion."""
    return subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
                          text=True).stdout


def make_run_setup(env: dict, base: str) -> str:
    """What `make run` does before it serves; the last line is bootstrap_demo's {"token", ...}."""
    return "".join(manage(env, *command)
                   for command in (["migrate", "--noinput"], ["ensure_object_store"], ["bootstrap_demo", "--url", base]))


@contextmanager
def serving(tmp_path, env: dict, port: int):
    """`manage.py serve` on ``port`` until the block ends; its log is printed after."""
    processes = Processes(tmp_path, env)
    try:
        processes.manage("serve", "serve", "--port", str(port))
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/api/schema/"), timeout=30, message="the web process")
        yield processes
    finally:
        processes.stop_all()
        print(processes.log("serve")[-3000:])


def http_json(url, token=None, method="GET", body=None):
    """(status, JSON body) of one API request; an error status comes back with its error body."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"null")


def answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
