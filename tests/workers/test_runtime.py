"""The worker runtime against the real authority on PostgreSQL: the heartbeat thread, the job
and the test's own threads each use their own connection, so these tests commit for real."""

import hashlib
import io
import threading
import time
import zipfile
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import OperationalError, connection

from kernel.clock import authority_now
from objectstore import get_object_store
from runs import authority
from runs.models import Attempt, AttemptState, PendingReason, Run, RunState, StoredObject
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import JobType, Schedule
from workers.intake import claim_and_execute
from workers.leases import lease_keeper
from workers.runtime import execute_claimed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]

FAST_RETRY = {"maxAttempts": 3, "initialDelaySeconds": 60, "maxDelaySeconds": 60}


def due_run(tenant, *, job_type="demo.sleep", params=None, timezone="UTC", lease_seconds=None,
            retry=FAST_RETRY) -> Run:
    """Create a schedule, make it due the way a scanner sees it, materialize and claim its run."""
    body = {"name": "s", "jobType": job_type, "params": params or {}, "retry": retry,
            "recurrence": {"kind": "cron", "cron": "0 9 * * *", "timezone": timezone}}
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert authority.materialize_due().queued == 1
    run = authority.claim(worker_label="w1", lease_seconds=lease_seconds)
    assert run is not None and run.schedule_id == schedule.id
    return run


def in_background(fn, *args, delay=0.0, **kwargs):
    """Run ``fn`` on another thread (with its own DB connection, closed after)."""
    box = {}

    def target():
        try:
            time.sleep(delay)
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # surfaced by the test through box["error"]
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def joined(thread, box, timeout=15):
    thread.join(timeout)
    assert not thread.is_alive()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def stored_bytes(run: Run) -> bytes:
    return get_object_store().get(run.result_key, run.result_version_id)


def count_calls(monkeypatch, name, *, fail_after_first=None):
    """Wrap authority.<name>, counting calls; optionally lose the reply of the first call."""
    real, calls = getattr(authority, name), []

    def wrapper(*args, **kwargs):
        calls.append(args or kwargs)
        result = real(*args, **kwargs)
        if fail_after_first and len(calls) == 1:
            raise fail_after_first
        return result

    monkeypatch.setattr(authority, name, wrapper)
    return calls


def test_execute__report_publishes_canonical_result_with_its_checksum(tenant):
    run = due_run(tenant, job_type="report.sales", params={"region": "eu"}, timezone="America/New_York")

    outcome = execute_claimed(run)

    assert outcome.outcome == "succeeded" and outcome.fence == 1 and outcome.error == ""
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.accepted_attempt_id == outcome.attempt_id
    assert run.result_content_type == "application/zip"
    data = stored_bytes(run)
    assert "sha256:" + hashlib.sha256(data).hexdigest() == run.result_checksum == outcome.checksum
    day = run.scheduled_at.astimezone(ZoneInfo("America/New_York")).date()
    assert f"sales-eu-{day.isoformat()}.csv" in zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert not lease_keeper().holding(outcome.attempt_id)  # released once the authority answered


def test_claim_and_execute__runs_one_claimable_run_or_returns_none(tenant):
    assert claim_and_execute(resource_classes=["short"], worker_label="w") == []
    run = due_run(tenant, params={"seconds": 0})
    execute_claimed(run)  # this one is done; make another claimable
    Schedule.objects.filter(id=run.schedule_id).update(next_run_at=authority_now() - timedelta(seconds=1))
    authority.materialize_due()

    assert claim_and_execute(resource_classes=["long"], worker_label="w") == []
    [outcome] = claim_and_execute(resource_classes=["short"], worker_label="w")

    assert outcome.outcome == "succeeded"
    finished = Run.objects.get(id=outcome.run_id)
    assert finished.id != run.id and finished.result_content_type == "application/json"
    assert b'"runId":"%s"' % finished.id.encode() in stored_bytes(finished)


def test_execute__transient_failure_leaves_run_pending_retry(tenant):
    run = due_run(tenant, params={"fail": "transient"})

    outcome = execute_claimed(run)

    assert outcome.outcome == "failed" and "transient" in outcome.error
    run.refresh_from_db()
    assert run.state == RunState.PENDING and run.pending_reason == PendingReason.RETRY
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.state == AttemptState.FAILED and attempt.retryable is True


def test_execute__permanent_failure_fails_the_run(tenant):
    run = due_run(tenant, params={"fail": "permanent"})

    outcome = execute_claimed(run)

    assert outcome.outcome == "failed"
    run.refresh_from_db()
    assert run.state == RunState.FAILED and "PermanentJobError" in run.error
    assert Attempt.objects.get(run=run).retryable is False


def test_execute__cancellation_seen_by_heartbeat_stops_the_job_early(tenant):
    run = due_run(tenant, params={"seconds": 10})
    canceler = in_background(authority.run_cancel, tenant=tenant, run_id=run.id, delay=0.3)

    outcome = execute_claimed(run, heartbeat_interval=0.1)

    joined(*canceler)
    assert outcome.outcome == "canceled" and outcome.duration_seconds < 3
    run.refresh_from_db()
    assert run.state == RunState.CANCELED and run.cancellation_accepted
    assert Attempt.objects.get(run=run).state == AttemptState.CANCELED
    assert not StoredObject.objects.filter(run=run).exists()


def test_execute__heartbeats_keep_a_short_lease_alive(tenant):
    run = due_run(tenant, params={"seconds": 2.5}, lease_seconds=1)

    outcome = execute_claimed(run)  # heartbeat every lease/3

    assert outcome.outcome == "succeeded"
    assert Run.objects.get(id=run.id).state == RunState.SUCCEEDED


def test_execute__lost_lease_stops_job_and_its_output_never_becomes_canonical(tenant):
    run = due_run(tenant, params={"seconds": 1.5})

    def expire_lease():  # the authority's view: this worker stopped renewing in time
        Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))

    expirer = in_background(expire_lease, delay=0.3)
    first = execute_claimed(run, heartbeat_interval=0.1)
    joined(*expirer)

    assert first.outcome == "lost" and first.duration_seconds < 1.2
    assert authority.sweep_expired_leases() == 1
    second_run = authority.claim(worker_label="w2")
    second = execute_claimed(second_run)

    assert second.outcome == "succeeded" and second.fence == 2
    run.refresh_from_db()
    assert run.accepted_attempt_id == second.attempt_id != first.attempt_id
    assert Attempt.objects.get(id=first.attempt_id).state == AttemptState.EXPIRED
    assert not StoredObject.objects.filter(attempt_id=first.attempt_id).exists()
    assert stored_bytes(run) and run.result_checksum == second.checksum


def test_execute__lease_expired_before_upload_is_stale_while_replacement_wins(tenant):
    run = due_run(tenant, params={"seconds": 1.5}, lease_seconds=1)
    # No heartbeat before the lease passes: the first worker finishes but no longer owns the run.
    first_thread = in_background(execute_claimed, run, heartbeat_interval=30)
    deadline = time.monotonic() + 5
    while not authority.sweep_expired_leases():
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.05)
    second = execute_claimed(authority.claim(worker_label="w2"))
    first = joined(*first_thread)

    assert first.outcome == "stale" and first.fence == 1
    assert second.outcome == "succeeded" and second.fence == 2
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.accepted_attempt_id == second.attempt_id
    assert not StoredObject.objects.filter(attempt_id=first.attempt_id).exists()


def test_execute__timeout_stops_the_job_and_allows_a_retry(tenant):
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=1)
    run = due_run(tenant, params={"seconds": 30})

    outcome = execute_claimed(run, heartbeat_interval=0.2)

    assert outcome.outcome == "failed" and "timed out" in outcome.error
    assert 0.9 < outcome.duration_seconds < 3
    run.refresh_from_db()
    assert run.state == RunState.PENDING and run.pending_reason == PendingReason.RETRY
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.retryable is True and "timed out" in attempt.error


def test_execute_batch__each_job_s_timeout_counts_from_its_own_start__on_the_authority_too(tenant, settings):
    """Two 0.7 s jobs with a 1 s timeout, claimed together and run one after the other: the
    second's clock starts when it starts, on the worker and on the authority, so neither
    times out. With a 0.3 s lease grace the claim's deadline would have ended the second's
    lease (claim + 1.3 s) before it finished (claim + 1.4 s); and the first's output, had it
    waited for the second job to be published with it, would have been refused the same way."""
    settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS = 0.3
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=1)
    for name in ("a", "b"):
        schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": name, "jobType": "demo.sleep", "params": {"seconds": 0.7},
            "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
        Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    authority.materialize_due()

    outcomes = claim_and_execute(resource_classes=["short"], worker_label="w", limit=2)

    assert [o.outcome for o in outcomes] == ["succeeded", "succeeded"], [o.error for o in outcomes]
    assert all(0.6 < o.job_seconds < 1 for o in outcomes)
    first, second = (Attempt.objects.get(id=o.attempt_id) for o in outcomes)
    assert first.started_at == second.started_at  # one claim
    assert first.deadline_at - first.started_at == timedelta(seconds=1)  # started at once: the claim's deadline
    assert second.deadline_at - second.started_at >= timedelta(seconds=1.6)  # from its own start


def test_execute_batch__a_run_whose_lease_passed_while_it_waited__does_not_start(tenant, settings):
    """The authority still bounds a run waiting in its batch: the first job outlasts the
    second's deadline plus the grace, so the second's lease has passed when its turn comes;
    its job never starts and nothing revives the lease (the sweeper takes the run)."""
    from workers.runtime import execute_batch

    settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS = 0.2
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=30)
    slow = due_run(tenant, params={"seconds": 1.5})
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=1)  # the next run's payload
    waiting = due_run(tenant, params={"seconds": 0, "fail": "permanent"})  # would fail, were it run

    outcomes = execute_batch([slow, waiting])  # the keeper beats every 10 s: not before the turn comes

    assert [o.outcome for o in outcomes] == ["succeeded", "stale"], [o.error for o in outcomes]
    waiting.refresh_from_db()
    assert waiting.state == RunState.RUNNING and waiting.lease_expires_at <= authority_now()
    attempt = Attempt.objects.get(id=waiting.current_attempt_id)
    assert attempt.deadline_at - attempt.started_at == timedelta(seconds=1)  # the claim's, not moved


@pytest.mark.parametrize("second_timeout, groups", [(1, [2]), (600, [1, 1])])
def test_execute_batch__waiting_outputs_are_published_before_a_job_that_could_outlast_their_leases(
        tenant, monkeypatch, second_timeout, groups):
    """Two quick jobs of one timeout are completed by one group commit; a job whose timeout
    (600 s) reaches past the first output's lease cap (its 1 s deadline plus the grace) has
    that output published before it starts."""
    from workers.runtime import execute_batch

    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=1)
    first = due_run(tenant, params={"seconds": 0})
    JobType.objects.filter(name="demo.sleep").update(timeout_seconds=second_timeout)
    second = due_run(tenant, params={"seconds": 0})
    calls = count_calls(monkeypatch, "complete_many")

    outcomes = execute_batch([first, second])

    assert [o.outcome for o in outcomes] == ["succeeded", "succeeded"]
    assert [len(outcomes_of_call[0]) for outcomes_of_call in calls] == groups


def test_execute_batch__a_run_that_cannot_be_held__leaves_no_lease_kept_alive(tenant, monkeypatch):
    """Holding the second run of a batch fails: no attempt of the batch stays in the keeper
    (a kept lease would keep its run running forever); their leases lapse for the sweeper."""
    from workers import runtime

    first, second = due_run(tenant, params={"seconds": 0}), due_run(tenant, params={"seconds": 0})
    real = runtime.context_for

    def broken(run, control):
        if run.id == second.id:
            raise ValueError("a payload the worker cannot read")
        return real(run, control)

    monkeypatch.setattr(runtime, "context_for", broken)
    with pytest.raises(ValueError):
        runtime.execute_batch([first, second])
    keeper = lease_keeper()
    assert not keeper.holding(first.current_attempt_id) and not keeper.holding(second.current_attempt_id)


def test_execute__lost_completion_reply_is_repeated_and_answered_with_saved_run(tenant, monkeypatch):
    run = due_run(tenant, params={"seconds": 0})
    calls = count_calls(monkeypatch, "complete_many", fail_after_first=OperationalError("connection lost"))

    outcome = execute_claimed(run)

    assert outcome.outcome == "succeeded" and len(calls) == 2
    assert {o.stored.checksum for (outcomes,) in calls for o in outcomes} == {outcome.checksum}
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.result_checksum == outcome.checksum


def test_execute__drop_completion_reply_failpoint_repeats_complete(tenant, monkeypatch, settings):
    settings.FAILPOINTS = frozenset({"drop_completion_reply"})
    run = due_run(tenant, params={"seconds": 0, "fail": "permanent"})
    calls = count_calls(monkeypatch, "complete_many")

    outcome = execute_claimed(run)

    assert outcome.outcome == "failed" and len(calls) == 2 and [o.outcome for (outcomes,) in calls for o in outcomes] == ["failed"] * 2
    assert Run.objects.get(id=run.id).state == RunState.FAILED
