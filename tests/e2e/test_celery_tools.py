"""The Celery tools people already use work with the settings the README gives: a worker
started with the README's command, on the README's `REDIS_URL`, answers
`celery -A scheduler_project inspect ping`. Real Redis, a real worker process."""

import re
import subprocess

import pytest

from tests.child_env import database_url_of_test_db
from tests.e2e.processes import PYTHON, ROOT, wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def readme_command(prefix: str) -> list[str]:
    """The README's command line starting with `prefix`, without its comment, as argv."""
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith(prefix):
            return line.split("#", 1)[0].split()
    raise AssertionError(f"README.md has no command starting with {prefix!r}")


def celery_argv(command: list[str]) -> list[str]:
    assert command[0] == "celery"
    return [PYTHON, "-m", "celery", *command[1:]]


def test_celery_inspect_ping__the_readme_worker_answers_pong(processes, redis_url):
    processes.env.update({"REDIS_URL": redis_url, "DATABASE_URL": database_url_of_test_db()})
    worker = readme_command("celery -A scheduler_project worker")
    ping = readme_command("celery -A scheduler_project inspect ping")
    assert ping == ["celery", "-A", "scheduler_project", "inspect", "ping"]
    processes.start("worker", celery_argv(worker))

    def answered():
        result = subprocess.run(
            celery_argv(ping), cwd=ROOT, env=processes.env, capture_output=True, text=True, timeout=30
        )
        return result if result.returncode == 0 else None

    result = wait_until(answered, timeout=90, interval=1, message="the worker to answer inspect ping")
    assert re.search(r"->\s+celery@\S+: OK\s+pong", result.stdout), result.stdout
    assert "1 node online." in result.stdout
