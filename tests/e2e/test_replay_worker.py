"""Replay with a real worker process: the embedded dispatcher (`manage.py dispatch`) runs a
job that fails for good; once its cause is fixed the run is replayed through the API, and
the same worker executes the replayed attempt, which succeeds with a higher fence."""

import pytest

from runs import authority
from runs.models import Run
from schedules.models import JobType
from tests.authority_steps import create_schedule
from tests.e2e.gated import gated_jobs  # noqa: F401
from tests.e2e.processes import wait_until
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_a_failed_run_replayed_after_the_fix_is_executed_by_the_worker_as_its_next_attempt(processes, gated_jobs):
    tenant = make_tenant("replaying")
    tenant.allowed_job_types.add(JobType.objects.get(name=gated_jobs.REPLAY_JOB))
    client = api_client(tenant)
    run, _ = authority.run_once(tenant=tenant, schedule_id=create_schedule(tenant, job_type=gated_jobs.REPLAY_JOB,
                                                                           params={}).id)
    processes.manage("worker", "dispatch", "--pools", "short=1", "--poll-interval", "0.1")

    def finished():
        body = client.get(f"/api/v1/runs/{run.id}").json()
        return body if body["state"] in ("succeeded", "failed", "canceled") else None

    failed = wait_until(finished, timeout=60, interval=0.1, message="the run to fail")
    assert failed["state"] == "failed" and "upstream down" in failed["error"]
    (gated_jobs.gate / "fixed").touch()

    replayed = client.post(f"/api/v1/runs/{run.id}/replay", {"note": "upstream fixed"}, format="json")
    assert replayed.status_code == 200, replayed.content
    succeeded = wait_until(finished, timeout=60, interval=0.1, message="the replayed run to finish")

    assert succeeded["state"] == "succeeded" and succeeded["result"] is not None, succeeded
    assert [(a["number"], a["state"], (a["replay"] or {}).get("note")) for a in succeeded["attempts"]] == [
        (1, "failed", None), (2, "succeeded", "upstream fixed")]
    assert Run.objects.get(id=run.id).fence == 2
