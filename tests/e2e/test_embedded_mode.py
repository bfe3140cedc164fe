"""Embedded mode as `make run` starts it: SQLite, file object store, no broker, one command."""

import hashlib
import json
import urllib.request

import pytest

from tests.e2e.embedded import embedded_env, http_json, make_run_setup, serving
from tests.e2e.processes import wait_until
from tests.servers import free_port

pytestmark = pytest.mark.slow


def test_embedded_mode__serve_runs_the_demo_schedule_and_serves_its_result(tmp_path):
    env = embedded_env(tmp_path)  # nothing configured, as after a fresh clone
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    demo = json.loads(make_run_setup(env, base).strip().splitlines()[-1])
    assert (tmp_path / "var" / "scheduler.sqlite3").exists()

    with serving(tmp_path, env, port):
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
