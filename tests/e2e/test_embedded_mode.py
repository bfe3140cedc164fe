"""Embedded mode as `make run` starts it: SQLite, file object store, no broker, one command."""

import hashlib
import json
import os
import subprocess
import urllib.request

import pytest

from tests.e2e.processes import PYTHON, ROOT, Processes, wait_until
from tests.servers import free_port

pytestmark = pytest.mark.slow


def http_json(url, token=None, method="GET", body=None):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read() or b"null")


def test_embedded_mode__serve_runs_the_demo_schedule_and_serves_its_result(tmp_path):
    # Nothing configured, as after a fresh clone: no database, broker, store or signing key.
    unset = {"DATABASE_URL", "REDIS_URL", "OBJECT_STORE_URL", "SECRET_KEY", "PUBLIC_BASE_URL", "ALLOWED_HOSTS"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env |= {"SCHEDULER_VAR_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    for command in (["migrate", "--noinput"], ["ensure_object_store"]):
        subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True)
    out = subprocess.run([PYTHON, "manage.py", "bootstrap_demo", "--url", base], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    demo = json.loads(out.strip().splitlines()[-1])
    assert (tmp_path / "var" / "scheduler.sqlite3").exists()

    processes = Processes(tmp_path, env)
    try:
        processes.manage("serve", "serve", "--port", str(port))
        wait_until(lambda: _answers(f"{base}/api/schema/"), timeout=30, message="the web process")
        token = demo["token"]

        def succeeded():
            _, page = http_json(f"{base}/api/v1/schedules/{demo['scheduleId']}/runs", token)
            return next((r for r in page["results"] if r["state"] == "succeeded"), None)

        run = wait_until(succeeded, timeout=90, message="the demo run to succeed")
        status, link = http_json(f"{base}/api/v1/runs/{run['runId']}/result", token)
        assert status == 200 and link["url"].startswith(base)
        with urllib.request.urlopen(link["url"], timeout=10) as response:
            data = response.read()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == run["result"]["checksum"] == link["checksum"]

        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        assert "scheduler_due_to_start_seconds_count" in metrics
        with urllib.request.urlopen(f"{base}/admin/login/", timeout=10) as response:
            assert response.status == 200
        # serve generated the installation's signing key once; its children signed and checked with it.
        assert len((tmp_path / "var" / "secret-key").read_text().strip()) >= 50
    finally:
        processes.stop_all()
        print(processes.log("serve")[-3000:])


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
