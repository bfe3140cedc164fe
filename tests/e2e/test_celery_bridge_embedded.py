"""A team's Celery task through the celery.task bridge in embedded mode (`make run`: SQLite,
the file store, no broker; the embedded dispatcher runs the jobs): the tenant's allowlist,
set with `create_tenant --celery-tasks`, decides which tasks it may schedule; every
occurrence of the schedule runs the task once, and its result is the task's return value as
JSON. The tasks are tests/workers/bridge_tasks.py, named in SCHEDULER_JOB_MODULES."""

import json
import urllib.request

import pytest

from tests.e2e.embedded import embedded_env, http_json, make_run_setup, manage, serving
from tests.e2e.processes import wait_until
from tests.servers import free_port

pytestmark = pytest.mark.slow

OCCURRENCES = 3
RETURNED = {"numbers": [1, 2.5, None], "recorded": "nightly"}  # tests.bridge.record's return value


def test_embedded_mode__a_bridged_celery_task_runs_once_per_occurrence_within_the_allowlist(tmp_path):
    ledger = tmp_path / "ledger.txt"
    env = embedded_env(tmp_path, SCHEDULER_JOB_MODULES="tests.workers.bridge_tasks")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    demo = json.loads(make_run_setup(env, base).strip().splitlines()[-1])
    team = json.loads(manage(env, "create_tenant", "team", "--celery-tasks", "tests.bridge.record").splitlines()[-1])

    with serving(tmp_path, env, port):
        def schedule(token, task, recurrence):
            return http_json(f"{base}/api/v1/schedules", token, "POST", {
                "name": task, "jobType": "celery.task", "params": {"task": task, "args": [str(ledger), "nightly"]},
                "recurrence": recurrence})

        every_2s = {"kind": "interval", "everySeconds": 2}
        for token, task in ((team["token"], "tests.bridge.add"), (demo["token"], "tests.bridge.record")):
            status, body = schedule(token, task, every_2s)  # registered in the worker, not on the list
            assert (status, body["error"]["code"]) == (403, "job_type_forbidden"), body
        status, created = schedule(team["token"], "tests.bridge.record", every_2s)
        assert status == 201, created
        runs_url = f"{base}/api/v1/schedules/{created['scheduleId']}/runs"

        def runs():
            return http_json(runs_url, team["token"])[1]["results"]

        def all_finished():
            page = runs()
            return page if all(r["state"] in ("succeeded", "failed", "canceled", "skipped") for r in page) else None

        wait_until(lambda: sum(r["state"] == "succeeded" for r in runs()) >= OCCURRENCES, timeout=90,
                   message=f"{OCCURRENCES} occurrences to succeed")
        assert http_json(f"{base}/api/v1/schedules/{created['scheduleId']}/pause", team["token"], "POST")[0] == 200
        done = wait_until(all_finished, timeout=60, message="the occurrences under way to finish")

        ran = [r for r in done if r["state"] != "skipped"]
        assert len(ran) >= OCCURRENCES and {r["state"] for r in ran} == {"succeeded"}, ran
        assert len({r["scheduledAt"] for r in ran}) == len(ran)  # one run per occurrence
        assert ledger.read_text() == "nightly\n" * len(ran)  # the task's body ran once for each
        for run in ran:
            assert run["trigger"] == "schedule" and len(run["attempts"]) == 1, run
            assert run["result"]["contentType"] == "application/json"
            status, link = http_json(f"{base}/api/v1/runs/{run['runId']}/result", team["token"])
            assert status == 200, link
            with urllib.request.urlopen(link["url"], timeout=10) as response:
                assert json.loads(response.read()) == RETURNED
