"""The authority end to end on one connection: materialize, claim, heartbeat, stage, complete."""

from datetime import timedelta

import pytest

from runs import authority
from workers import uploads
from kernel.clock import authority_now
from runs.models import Attempt, AttemptState, ObjectState, Outbox, Run, RunState, StoredObject
from schedules.models import Schedule
from kernel.errors import InvalidState, StaleFence
from tests.authority_steps import create_schedule, make_due

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


def make_due_schedule(tenant, **extra):
    # A yearly rule: the instant make_due sets is the only one due, whenever the test runs.
    schedule = create_schedule(tenant, **extra)
    make_due(schedule)
    return Schedule.objects.get(id=schedule.id)


def test_materialize__creates_one_queued_run_and_dispatch_intent(tenant):
    schedule = make_due_schedule(tenant)
    stats = authority.materialize_due()
    assert stats.queued == 1
    run = Run.objects.get(schedule=schedule)
    assert run.state == RunState.QUEUED and run.revision == 1
    assert Outbox.objects.filter(action_key=f"dispatch-{run.id}").exists()
    schedule.refresh_from_db()
    assert schedule.next_run_at > authority_now()
    assert authority.materialize_due().queued == 0


def test_claim_heartbeat_stage_complete__publishes_canonical_result(tenant):
    schedule = make_due_schedule(tenant)
    authority.materialize_due()
    run = authority.claim(worker_label="w1", lease_seconds=30)
    attempt = run.current_attempt
    assert run.fence == 1 and attempt.number == 1
    schedule.refresh_from_db()
    assert schedule.active_run_id == run.id
    authority.heartbeat(run_id=run.id, attempt_id=attempt.id, fence=1)
    obj = uploads.stage_result(run_id=run.id, attempt_id=attempt.id, fence=1, data=b"hello", content_type="text/plain")
    done = authority.complete(run_id=run.id, attempt_id=attempt.id, fence=1, outcome="succeeded",
                              object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum)
    assert done.state == RunState.SUCCEEDED and done.result_checksum == obj.checksum
    assert StoredObject.objects.get(id=obj.id).state == ObjectState.REFERENCED
    schedule.refresh_from_db()
    assert schedule.active_run_id is None
    again = authority.complete(run_id=run.id, attempt_id=attempt.id, fence=1, outcome="succeeded",
                               object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum)
    assert again.result_checksum == obj.checksum
    with pytest.raises(InvalidState):
        authority.complete(run_id=run.id, attempt_id=attempt.id, fence=1, outcome="succeeded",
                           object_key=obj.key, version_id=obj.version_id, checksum="sha256:" + "0" * 64)


def test_sweep__expires_lease_and_requeues_with_higher_fence(tenant):
    make_due_schedule(tenant)
    authority.materialize_due()
    run = authority.claim(worker_label="a", lease_seconds=30)
    Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    with pytest.raises(StaleFence):
        authority.heartbeat(run_id=run.id, attempt_id=run.current_attempt.id, fence=1)
    assert authority.sweep_expired_leases() == 1
    expired = Attempt.objects.get(id=run.current_attempt.id)
    assert expired.state == AttemptState.EXPIRED and expired.expired_at == expired.finished_at is not None
    again = authority.claim(worker_label="b")
    assert again.id == run.id and again.fence == 2
    with pytest.raises(StaleFence):
        authority.complete(run_id=run.id, attempt_id=run.current_attempt.id, fence=1, outcome="failed")


def test_transient_failure__retries_with_same_revision(tenant):
    make_due_schedule(tenant, retry={"maxAttempts": 2, "initialDelaySeconds": 0, "maxDelaySeconds": 0})
    authority.materialize_due()
    run = authority.claim(worker_label="a")
    authority.complete(run_id=run.id, attempt_id=run.current_attempt.id, fence=1, outcome="failed",
                       error="boom", retryable=True)
    assert Run.objects.get(id=run.id).state == RunState.PENDING
    assert authority.promote_due_runs() == 1
    second = authority.claim(worker_label="b")
    assert second.id == run.id and second.fence == 2 and second.revision == 1
    final = authority.complete(run_id=run.id, attempt_id=second.current_attempt.id, fence=2, outcome="failed",
                               error="boom", retryable=True)
    assert final.state == RunState.FAILED
