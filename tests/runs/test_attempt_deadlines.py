"""The authority's half of hard timeouts: an attempt's deadline is its claim plus its job
type's timeout (database time), no lease outlasts it by more than the timeout grace whatever
the worker's heartbeats, a lease that ended there is recorded by the sweeper as a timeout
(failed, retried with backoff), and a worker reports one with ``reason: "timeout"``."""

from datetime import timedelta

import pytest
from django.conf import settings

from kernel.clock import authority_now
from kernel.errors import InvalidRequest, StaleFence
from runs import authority
from runs.models import Attempt, Run, RunState
from schedules.models import JobType
from tests.authority_steps import create_schedule, start_run
from tests.factories import api_client, make_worker_token

pytestmark = pytest.mark.django_db(transaction=True)
GRACE = timedelta(seconds=settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS)


def timed_run(tenant, *, timeout: int = 2, lease_seconds: int = 60, max_attempts: int = 2) -> Run:
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=timeout)
    schedule = create_schedule(tenant, retry={"maxAttempts": max_attempts, "initialDelaySeconds": 1,
                                              "maxDelaySeconds": 1})
    return start_run(schedule, lease_seconds=lease_seconds)


def pass_deadline(run: Run, seconds: float) -> None:
    """Time passes: the attempt's deadline is ``seconds`` behind database time."""
    Attempt.objects.filter(id=run.current_attempt_id).update(deadline_at=authority_now() - timedelta(seconds=seconds))


def test_claim__the_deadline_is_the_claim_plus_the_timeout_and_caps_the_lease(tenant):
    run = timed_run(tenant, timeout=2, lease_seconds=60)
    attempt = Attempt.objects.get(id=run.current_attempt_id)
    assert attempt.deadline_at - attempt.started_at == timedelta(seconds=2)
    assert attempt.lease_expires_at == attempt.deadline_at + GRACE  # not started_at + 60 s
    assert Run.objects.get(id=run.id).lease_expires_at == attempt.lease_expires_at


@pytest.mark.parametrize("beat", ["heartbeat_many", "heartbeat"])
def test_heartbeats__never_extend_a_lease_past_the_deadline_plus_the_grace(tenant, beat):
    run = timed_run(tenant, timeout=2, lease_seconds=60)
    pass_deadline(run, GRACE.total_seconds() - 1)  # one second of grace left
    if beat == "heartbeat_many":  # the workers' statement (PostgreSQL)
        assert authority.heartbeat_many([(run.current_attempt_id, run.fence)]) == {run.current_attempt_id: False}
    else:  # the HTTP workers' and the embedded SQLite's path
        authority.heartbeat(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    attempt = Attempt.objects.get(id=run.current_attempt_id)
    assert attempt.lease_expires_at == attempt.deadline_at + GRACE
    assert attempt.lease_expires_at < authority_now() + timedelta(seconds=1.5)


def test_heartbeat__past_the_capped_lease__refused_whatever_the_worker_s_clock(tenant):
    run = timed_run(tenant, timeout=2, lease_seconds=60)
    pass_deadline(run, GRACE.total_seconds() + 1)
    Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    assert authority.heartbeat_many([(run.current_attempt_id, run.fence)]) == {}
    with pytest.raises(StaleFence):
        authority.heartbeat(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)


def test_restart_deadline__counts_from_now_and_extends_the_lease_under_it(tenant):
    """A job that waited behind others of its batch starts: its deadline counts again from now."""
    run = timed_run(tenant, timeout=2, lease_seconds=60)
    pass_deadline(run, 1)  # its claim's deadline passed a second ago; the grace still holds its lease
    before = authority_now()
    authority.restart_deadline(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    attempt = Attempt.objects.get(id=run.current_attempt_id)
    assert before + timedelta(seconds=2) <= attempt.deadline_at <= authority_now() + timedelta(seconds=2)
    assert attempt.lease_expires_at == attempt.deadline_at + GRACE  # still capped: not now + 60 s
    assert Run.objects.get(id=run.id).lease_expires_at == attempt.lease_expires_at


def test_restart_deadline__a_passed_lease_or_an_old_fence__refused_and_nothing_moved(tenant):
    run = timed_run(tenant, timeout=2, lease_seconds=60)
    with pytest.raises(StaleFence):
        authority.restart_deadline(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence - 1)
    Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    deadline = Attempt.objects.get(id=run.current_attempt_id).deadline_at
    with pytest.raises(StaleFence):
        authority.restart_deadline(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    assert Attempt.objects.get(id=run.current_attempt_id).deadline_at == deadline
    assert Run.objects.get(id=run.id).lease_expires_at < authority_now()


def test_sweep__a_lease_that_ended_at_the_deadline__failed_timeout_then_retried_then_failed(tenant):
    run = timed_run(tenant, timeout=2, max_attempts=2)
    for number in (1, 2):
        pass_deadline(run, GRACE.total_seconds() + 1)
        Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
        assert authority.sweep_expired_leases() == 1
        attempt = Attempt.objects.get(run=run, number=number)
        assert (attempt.state, attempt.reason, attempt.retryable) == ("failed", "timeout", True)
        assert attempt.error == "timed out after 2s (lease ended at the timeout)"
        run.refresh_from_db()
        if number == 1:  # behind its retry delay, like any retryable failure
            assert (run.state, run.pending_reason) == (RunState.PENDING, "retry")
            Run.objects.filter(id=run.id).update(due_at=authority_now() - timedelta(seconds=1))
            authority.promote_due_runs()
            run = authority.claim(worker_label="w2")
            assert run is not None and run.fence == 2
    assert run.state == RunState.FAILED


def test_sweep__a_plain_expired_lease_before_the_deadline__still_expired(tenant):
    run = timed_run(tenant, timeout=600)
    Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    assert authority.sweep_expired_leases() == 1
    attempt = Attempt.objects.get(id=run.current_attempt_id)
    assert (attempt.state, attempt.reason) == ("expired", "")


def test_complete__reason_timeout_recorded__other_reasons_and_outcomes_refused(tenant):
    run = timed_run(tenant)
    ids = dict(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    for bad in (dict(outcome="failed", reason="slow"), dict(outcome="canceled", reason="timeout")):
        with pytest.raises(InvalidRequest):
            authority.complete(**ids, **bad)
    authority.complete(**ids, outcome="failed", error="timed out after 2s", retryable=True, reason="timeout")
    attempt = Attempt.objects.get(id=run.current_attempt_id)
    assert (attempt.state, attempt.reason) == ("failed", "timeout")


def test_http__complete_with_reason_timeout__shown_on_the_run_s_attempts(tenant):
    token = make_worker_token(resource_classes=["short"])
    tenant.allowed_job_types.add(JobType.objects.get(name="demo.sleep"))
    worker = api_client(token)
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=2)
    schedule = create_schedule(tenant)
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    claimed = worker.post("/api/v1/worker/claim", {"workerId": "w"}, format="json").json()
    ids = {"runId": claimed["runId"], "attemptId": claimed["attemptId"], "fence": claimed["fence"]}
    for bad in ({"outcome": "failed", "reason": "slow"}, {"outcome": "canceled", "reason": "timeout"},
                {"outcome": "failed", "reason": 1}):
        refused = worker.post("/api/v1/worker/complete", {**ids, **bad}, format="json")
        assert refused.status_code == 400, refused.content
        assert refused.json()["error"]["code"] == "invalid_request"
    done = worker.post("/api/v1/worker/complete", {**ids, "outcome": "failed", "error": "timed out after 2s",
                                                    "retryable": True, "reason": "timeout"}, format="json")
    assert done.status_code == 200, done.content
    shown = api_client(tenant).get(f"/api/v1/runs/{run.id}").json()["attempts"]
    assert [(a["state"], a["reason"]) for a in shown] == [("failed", "timeout")]
