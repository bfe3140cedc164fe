"""Overlap policies with a long-running occurrence: the active-run guard decides which
occurrence may run; buffer_one keeps one waiter, skip keeps none, allow runs them together."""

import pytest

from runs import authority
from runs.models import Outbox, PendingReason, Run, RunState, SkipReason
from schedules.models import Schedule
from tests.authority_steps import complete_success, create_schedule, expire_lease, materialize_one, stage

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


def finish(run: Run, data: bytes = b"done") -> Run:
    return complete_success(run.id, run.current_attempt_id, run.fence, stage(run, data))


def guard_of(schedule) -> str | None:
    return Schedule.objects.get(id=schedule.id).active_run_id


def dispatched(run) -> bool:
    return Outbox.objects.filter(run=run, kind="dispatch").exists()


def test_overlap_buffer_one__long_running_occurrence__next_waits_pending_third_skipped(tenant):
    schedule = create_schedule(tenant)  # buffer_one is the default
    first = materialize_one(schedule)
    running = authority.claim(worker_label="w")
    assert running.id == first.id and running.holds_guard and guard_of(schedule) == first.id

    second = materialize_one(schedule)
    assert (second.state, second.pending_reason) == (RunState.PENDING, PendingReason.OVERLAP)
    assert not dispatched(second) and not second.holds_guard
    third = materialize_one(schedule)
    assert (third.state, third.skip_reason) == (RunState.SKIPPED, SkipReason.OVERLAP)
    assert third.finished_at is not None and not dispatched(third)

    # The waiter cannot be claimed or promoted while the guard is held.
    assert authority.claim(worker_label="w") is None
    assert authority.promote_due_runs() == 0
    assert Run.objects.get(id=second.id).state == RunState.PENDING

    finish(running)
    promoted = Run.objects.get(id=second.id)
    assert (promoted.state, promoted.pending_reason) == (RunState.QUEUED, PendingReason.NONE)
    assert dispatched(promoted) and guard_of(schedule) is None
    assert not Run.objects.get(id=first.id).holds_guard

    taken = authority.claim(worker_label="w")
    assert taken.id == second.id and taken.holds_guard and guard_of(schedule) == second.id
    assert Run.objects.get(id=third.id).state == RunState.SKIPPED


def test_overlap_buffer_one__holder_fails__waiter_promoted(tenant):
    schedule = create_schedule(tenant)
    materialize_one(schedule)
    holder = authority.claim(worker_label="w")
    waiter = materialize_one(schedule)
    authority.complete(run_id=holder.id, attempt_id=holder.current_attempt_id, fence=holder.fence,
                       outcome="failed", error="bad query", retryable=False)
    assert Run.objects.get(id=waiter.id).state == RunState.QUEUED
    assert authority.claim(worker_label="w").id == waiter.id


def test_overlap_buffer_one__holder_retries__keeps_guard_until_it_ends(tenant):
    schedule = create_schedule(tenant, retry={"maxAttempts": 2, "initialDelaySeconds": 0, "maxDelaySeconds": 0})
    first = materialize_one(schedule)
    holder = authority.claim(worker_label="w")
    waiter = materialize_one(schedule)

    expire_lease(holder.id)
    assert authority.sweep_expired_leases() == 1
    requeued = Run.objects.get(id=first.id)
    assert requeued.state == RunState.QUEUED and requeued.holds_guard and guard_of(schedule) == first.id
    assert Run.objects.get(id=waiter.id).state == RunState.PENDING

    retry = authority.claim(worker_label="w")
    assert (retry.id, retry.fence) == (first.id, 2)
    assert Run.objects.get(id=waiter.id).state == RunState.PENDING
    expire_lease(retry.id)
    authority.sweep_expired_leases()  # attempts used up: the run fails and frees the guard
    assert Run.objects.get(id=first.id).state == RunState.FAILED
    assert authority.claim(worker_label="w").id == waiter.id


def test_overlap_buffer_one__run_once_while_running__waits_for_guard_at_claim(tenant):
    schedule = create_schedule(tenant)
    materialize_one(schedule)
    holder = authority.claim(worker_label="w")
    manual, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    assert manual.state == RunState.QUEUED  # the guard is taken at claim, not at creation

    assert authority.claim(worker_label="w") is None
    blocked = Run.objects.get(id=manual.id)
    assert (blocked.state, blocked.pending_reason) == (RunState.PENDING, PendingReason.OVERLAP)
    assert Run.objects.filter(schedule=schedule, state=RunState.RUNNING).count() == 1

    finish(holder)
    assert authority.claim(worker_label="w").id == manual.id


def test_overlap_skip__long_running_occurrence__next_instants_skipped(tenant):
    schedule = create_schedule(tenant, overlapPolicy="skip")
    materialize_one(schedule)
    holder = authority.claim(worker_label="w")
    for _ in range(2):
        skipped = materialize_one(schedule)
        assert (skipped.state, skipped.skip_reason) == (RunState.SKIPPED, SkipReason.OVERLAP)
    assert authority.claim(worker_label="w") is None
    finish(holder)
    following = materialize_one(schedule)
    assert following.state == RunState.QUEUED
    assert authority.claim(worker_label="w").id == following.id


def test_overlap_allow__long_running_occurrence__next_runs_alongside(tenant):
    schedule = create_schedule(tenant, overlapPolicy="allow")
    materialize_one(schedule)
    first = authority.claim(worker_label="w")
    second = materialize_one(schedule)
    assert second.state == RunState.QUEUED and dispatched(second)
    also = authority.claim(worker_label="w")
    assert also.id == second.id
    assert Run.objects.filter(schedule=schedule, state=RunState.RUNNING).count() == 2
    assert not Run.objects.filter(schedule=schedule, holds_guard=True).exists() and guard_of(schedule) is None
    finish(first)
    finish(also)
    assert set(Run.objects.filter(schedule=schedule).values_list("state", flat=True)) == {RunState.SUCCEEDED}
