"""Kleppmann's fencing argument with real processes: one occurrence, its attempt 1 frozen
(SIGSTOP) past its lease inside the job, attempt 2 claimed by another worker process writes
the team's table and bucket through the fencing helpers and succeeds, then attempt 1 resumes
and writes too: the table and the bucket keep attempt 2's values and attempt 1 is told
StaleAttempt (and that it no longer owns the run)."""

import json
import signal
import uuid

import pytest

from examples.models import DailyTotal
from objectstore.s3_client import s3_client
from runs import authority
from runs.models import Attempt, Run, RunState
from schedules.models import JobType
from tests.authority_steps import create_schedule
from tests.e2e.gated import gated_jobs  # noqa: F401
from tests.e2e.processes import PYTHON, wait_until
from tests.factories import make_tenant
from workers.jobs import fenced_get

# One worker process: claim one run of the declared job types, execute it, exit.
WORKER = ("import sys, django; django.setup(); from workers.intake import claim_and_execute;"
          " print(claim_and_execute(resource_classes=['short'], worker_label=sys.argv[1]))")


@pytest.mark.django_db(transaction=True)
def test_a_frozen_attempt_resumed_after_its_successor_cannot_overwrite_the_team_s_table_or_object(
        processes, gated_jobs, moto_server):
    proof_job, gate = gated_jobs, gated_jobs.gate
    bucket = f"team-{uuid.uuid4().hex[:12]}"
    client = s3_client(moto_server, "us-east-1")
    client.create_bucket(Bucket=bucket)
    processes.env.update({"TEAM_S3_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing",
                          "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"})
    tenant = make_tenant("fenced")
    tenant.allowed_job_types.add(JobType.objects.get(name=proof_job.PROOF_JOB))
    schedule = create_schedule(tenant, job_type=proof_job.PROOF_JOB, params={"bucket": bucket})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)

    first = processes.start("worker-1", [PYTHON, "-c", WORKER, "worker-1"])
    wait_until(lambda: (gate / "claimed-1").exists(), timeout=30, message="attempt 1 to start its job")
    processes.signal("worker-1", signal.SIGSTOP)  # frozen inside the job: no heartbeat, no write

    def requeued():
        authority.sweep_expired_leases()
        return Run.objects.get(id=run.id).state == RunState.QUEUED

    wait_until(requeued, timeout=15, interval=0.2, message="attempt 1's lease to pass")
    second = processes.start("worker-2", [PYTHON, "-c", WORKER, "worker-2"])
    assert second.wait(timeout=60) == 0, processes.log("worker-2")
    run.refresh_from_db()
    assert (run.state, run.fence, run.accepted_attempt.number) == (RunState.SUCCEEDED, 2, 2)

    (gate / "open").touch()
    processes.signal("worker-1", signal.SIGCONT)
    assert first.wait(timeout=60) == 0, processes.log("worker-1")

    told = json.loads((gate / "told-1.json").read_text())
    assert told["fence"] == 1 and told["stillOwner"] is False
    assert told["table"].startswith("StaleAttempt") and told["bucket"].startswith("StaleAttempt"), told
    assert json.loads((gate / "told-2.json").read_text()) == {
        "fence": 2, "stillOwner": True, "table": "written", "bucket": "written"}
    row = DailyTotal.objects.get()
    assert (row.written_by_attempt, row.fence, row.fence_run_id) == (2, 2, run.id)
    assert fenced_get(client, bucket, proof_job.KEY) == b"attempt 2"
    run.refresh_from_db()
    assert (run.state, run.accepted_attempt.number) == (RunState.SUCCEEDED, 2)
    assert Attempt.objects.get(run=run, number=1).state == "expired"
