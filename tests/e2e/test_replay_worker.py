"""Replay with real worker processes: the embedded dispatcher (`manage.py dispatch`), and a
Celery worker fed by the relay through Redis, run a job that fails for good; once its cause
is fixed the run is replayed through the API, and the same worker executes the replayed
attempt, which succeeds with a higher fence. Through Celery, the run's email effect reaches
a real SMTP server (`manage.py effects`) once: for the success, not the failure."""

import time

import pytest

from runs import authority
from runs.models import Attempt, Run
from schedules.models import JobType
from tests.authority_steps import create_schedule
from tests.e2e.gated import gated_jobs
from tests.e2e.processes import wait_until
from tests.effects.helpers import attachments, read_mailbox, start_smtp_sink
from tests.factories import api_client, make_tenant
from tests.servers import stop_process

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


@pytest.fixture
def smtp_sink(tmp_path):
    mailbox = tmp_path / "mailbox"
    mailbox.mkdir()
    process, port = start_smtp_sink(mailbox)
    try:
        yield mailbox, port
    finally:
        stop_process(process)


@pytest.mark.django_db(transaction=True)
def test_through_celery__a_replayed_run_is_executed_under_a_higher_fence_and_mails_once(
        processes, gated_jobs, redis_url, smtp_sink):
    mailbox, smtp_port = smtp_sink
    processes.env.update({"REDIS_URL": redis_url, "EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(smtp_port),
                          "IDLE_CLAIM_SECONDS": "0"})  # every claim through a hint the relay published
    tenant = make_tenant("replaying")
    tenant.allowed_job_types.add(JobType.objects.get(name=gated_jobs.REPLAY_JOB))
    client = api_client(tenant)
    schedule = create_schedule(tenant, job_type=gated_jobs.REPLAY_JOB, params={},
                               effects={"email": {"to": ["sales@example.com"]}})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    processes.manage("relay", "relay")
    processes.manage("effects", "effects")
    processes.celery_worker("worker", "short", concurrency=1)

    def finished():
        body = client.get(f"/api/v1/runs/{run.id}").json()
        return body if body["state"] in ("succeeded", "failed", "canceled") else None

    failed = wait_until(finished, timeout=90, interval=0.1,
                        message=f"the run to fail ({processes.log('worker')[-2000:]})")
    assert failed["state"] == "failed" and "upstream down" in failed["error"]
    (gated_jobs.gate / "fixed").touch()

    replayed = client.post(f"/api/v1/runs/{run.id}/replay", {"note": "upstream fixed"}, format="json")
    assert replayed.status_code == 200, replayed.content
    succeeded = wait_until(finished, timeout=60, interval=0.1,
                           message=f"the replayed run to finish ({processes.log('worker')[-2000:]})")

    assert succeeded["state"] == "succeeded" and succeeded["result"] is not None, succeeded
    assert [(a["number"], a["state"], (a["replay"] or {}).get("note")) for a in succeeded["attempts"]] == [
        (1, "failed", None), (2, "succeeded", "upstream fixed")]
    assert [(a.fence, a.worker_label.split(":")[0]) for a in Attempt.objects.filter(run_id=run.id).order_by("number")
            ] == [(1, "celery"), (2, "celery")]
    assert Run.objects.get(id=run.id).fence == 2
    wait_until(lambda: read_mailbox(mailbox), timeout=30, interval=0.1,
               message=f"the mail ({processes.log('effects')[-2000:]})")
    time.sleep(2)  # the effects loop's further passes: nothing more is sent
    [mail] = read_mailbox(mailbox)
    assert mail["To"] == "sales@example.com"
    assert [data for _, data in attachments(mail)] == [b"fixed, fence 2"]  # written by the replayed attempt
    effects = client.get(f"/api/v1/runs/{run.id}").json()["effects"]
    assert [(e["action"], e["state"]) for e in effects] == [(f"send-{run.id}", "sent")]  # the occurrence's one
