"""A team's own job, end to end with real processes: declared outside the scheduler's code,
discovered by every process, synced into the catalog, scheduled through the API, run, its
progress read through the API while it runs, and its streamed result downloaded.

Redis mode runs the examples app's CSV export (an installed app's `jobs` module) on Celery;
embedded mode follows README "Add your first job" with a plain module named in
SCHEDULER_JOB_MODULES, added after the demo was set up."""

import hashlib
import json
import subprocess
import textwrap
import urllib.request

import pytest

from runs.models import Run, RunState
from tests.child_env import redis_mode
from tests.e2e.embedded import embedded_env, http_json, make_run_setup, serving
from tests.e2e.processes import PYTHON, ROOT, wait_until
from tests.factories import api_client, make_tenant
from tests.servers import free_port

pytestmark = pytest.mark.slow

TEAM_MODULE = '''
    from workers.jobs import JobContext, scheduler_job

    @scheduler_job("team.greetings", resource_class="short", lease_seconds=30, timeout_seconds=120,
                   params_schema={"type": "object", "additionalProperties": False,
                                  "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 20}}})
    def greetings(ctx: JobContext):
        steps = ctx.params.get("steps", 3)
        with ctx.output("text/csv", f"greetings-{ctx.local_date()}.csv") as out:
            out.write("step,tenant,attempt,local\\n")
            for step in range(1, steps + 1):
                ctx.progress(step / steps, f"step {step} of {steps}")
                out.write(f"{step},{ctx.tenant.name},{ctx.attempt},{ctx.scheduled_at_local.isoformat()}\\n")
                ctx.sleep(1.2)
'''


def watch_progress(read_run, *, timeout: float) -> tuple[list[dict], dict]:
    """Poll a run until it finishes: the progress values seen while it ran, and the finished run."""
    seen = []

    def finished():
        run = read_run()
        if run["state"] == "running" and run["progress"] and run["progress"] not in seen:
            seen.append(run["progress"])
        return run if run["state"] in ("succeeded", "failed", "canceled") else None

    return seen, wait_until(finished, timeout=timeout, interval=0.1, message="the run to finish")


def download(url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as response:
        return response.read()


@pytest.mark.django_db(transaction=True)
def test_redis_mode__the_examples_csv_export_runs_with_progress_and_a_streamed_result(
        processes, redis_url, moto_server, settings):
    rows = 1_000_000
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="team"):
        checked = subprocess.run([PYTHON, "manage.py", "sync_job_types", "--check"], cwd=ROOT, env=processes.env,
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr  # migrate synced the declaration
        client = api_client(make_tenant("acme"))
        created = client.post("/api/v1/schedules", {
            "name": "orders", "jobType": "examples.orders_csv", "params": {"rows": rows},
            "recurrence": {"kind": "cron", "cron": "0 6 * * *", "timezone": "Europe/Berlin"},
        }, format="json")
        assert created.status_code == 201, created.content
        run_id = client.post(f"/api/v1/schedules/{created.json()['scheduleId']}/runs", {}, format="json").json()["runId"]
        processes.manage("relay", "relay")
        processes.celery_worker("worker", "long", concurrency=1)

        seen, run = watch_progress(lambda: client.get(f"/api/v1/runs/{run_id}").json(), timeout=180)

        assert run["state"] == "succeeded", run
        assert seen and 0 < seen[0]["fraction"] < 1 and seen[0]["message"].endswith(f"of {rows:,} rows")
        assert run["progress"]["fraction"] == 1.0 and run["progress"]["message"] == f"{rows:,} rows exported"
        data = download(client.get(f"/api/v1/runs/{run_id}/result").json()["url"])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == run["result"]["checksum"]
        assert run["result"]["contentType"] == "text/csv" and data.count(b"\n") == rows + 1
        assert data.startswith(b"order_id,order_date,customer_id,sku,quantity,unit_price,currency\n")
        assert Run.objects.get(id=run_id).state == RunState.SUCCEEDED


def test_embedded_mode__a_team_module_added_after_set_up_is_synced_granted_and_run(tmp_path):
    team = tmp_path / "team" / "teamjobs"
    team.mkdir(parents=True)
    (team / "__init__.py").write_text("")
    (team / "jobs.py").write_text(textwrap.dedent(TEAM_MODULE))
    env = embedded_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    make_run_setup(env, base)  # the first `make run`, before the team's job exists
    env |= {"SCHEDULER_JOB_MODULES": "teamjobs.jobs", "PYTHONPATH": str(tmp_path / "team")}
    out = make_run_setup(env, base)
    assert "Job types: added    team.greetings: resource_class='short'" in out
    token = json.loads(out.strip().splitlines()[-1])["token"]

    with serving(tmp_path, env, port):
        status, schedule = http_json(f"{base}/api/v1/schedules", token, "POST", {
            "name": "greetings", "jobType": "team.greetings", "params": {"steps": 4},
            "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
        })
        assert status == 201, schedule
        status, run = http_json(f"{base}/api/v1/schedules/{schedule['scheduleId']}/runs", token, "POST", {})
        assert status == 201, run

        seen, run = watch_progress(lambda: http_json(f"{base}/api/v1/runs/{run['runId']}", token)[1], timeout=90)

        assert run["state"] == "succeeded", run
        assert [p["message"] for p in seen][:2] == ["step 1 of 4", "step 2 of 4"]
        assert run["progress"]["fraction"] == 1.0 and run["progress"]["message"] == "step 4 of 4"
        status, link = http_json(f"{base}/api/v1/runs/{run['runId']}/result", token)
        data = download(link["url"])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == run["result"]["checksum"]
        lines = data.decode().splitlines()
        assert lines[0] == "step,tenant,attempt,local" and len(lines) == 5
        assert lines[1].startswith("1,demo,1,") and lines[1].endswith(("-04:00", "-05:00"))
