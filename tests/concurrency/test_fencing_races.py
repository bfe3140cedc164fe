"""Sections 08 and 13: fencing. A paused worker, completion racing lease expiry, a lost
completion reply, and cancellation racing completion. Each worker, sweeper and client is
its own PostgreSQL session; the database decides every ordering."""

import time
from datetime import timedelta

import pytest
from django.forms.models import model_to_dict

from kernel.clock import authority_now
from kernel.errors import InvalidState, StaleFence
from runs import authority
from runs.models import (
    Attempt, AttemptState, EffectIntent, ObjectState, Outbox, Run, RunState, StoredObject, TERMINAL_STATES,
)
from tests.authority_steps import (
    complete_success, create_schedule, expire_lease, materialize_one, set_lease_deadline, stage,
)
from tests.concurrency.harness import race
from workers import uploads

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"email": {"to": ["sales@example.com"]}}


def run_row(run_id):
    return model_to_dict(Run.objects.get(id=run_id))


def attempt_rows(run_id):
    return [model_to_dict(a) for a in Attempt.objects.filter(run_id=run_id).order_by("number")]


# --- 2. the paused worker -------------------------------------------------------------


def test_paused_worker__replacement_completes__stale_fence_everywhere_and_result_stays_canonical(tenant, sessions):
    worker_a, worker_b, sweeper = sessions("worker-a"), sessions("worker-b"), sessions("sweeper")
    run = materialize_one(create_schedule(tenant, effects=EMAIL))

    a = worker_a.call(authority.claim, worker_label="A", lease_seconds=30)
    assert a.id == run.id
    n, a_attempt = a.fence, a.current_attempt_id
    worker_a.call(authority.heartbeat, run_id=run.id, attempt_id=a_attempt, fence=n)
    a_obj = worker_a.call(stage, a, b"report written by A before its stall")

    # A stalls past its deadline. Its fence is stale before any sweeper runs.
    expire_lease(run.id)
    before = run_row(run.id)
    with pytest.raises(StaleFence):
        worker_a.call(authority.heartbeat, run_id=run.id, attempt_id=a_attempt, fence=n)
    with pytest.raises(StaleFence):
        worker_a.call(complete_success, run.id, a_attempt, n, a_obj)
    assert run_row(run.id) == before

    assert sweeper.call(authority.sweep_expired_leases) == 1
    b = worker_b.call(authority.claim, worker_label="B", lease_seconds=30)
    assert (b.id, b.fence) == (run.id, n + 1) and b.current_attempt_id != a_attempt
    b_obj = worker_b.call(stage, b, b"report written by B")
    worker_b.call(complete_success, run.id, b.current_attempt_id, b.fence, b_obj)
    canonical = run_row(run.id)

    # A resumes: every call it makes is refused as stale, and changes nothing.
    with pytest.raises(StaleFence):
        worker_a.call(authority.heartbeat, run_id=run.id, attempt_id=a_attempt, fence=n)
    with pytest.raises(StaleFence):
        worker_a.call(complete_success, run.id, a_attempt, n, a_obj)
    with pytest.raises(StaleFence):
        worker_a.call(complete_success, run.id, a_attempt, n, b_obj)  # nor can it adopt B's object
    with pytest.raises(StaleFence):
        worker_a.call(authority.complete, run_id=run.id, attempt_id=a_attempt, fence=n, outcome="failed",
                      error="A gave up", retryable=True)
    with pytest.raises(StaleFence):  # a fence A never held is no better
        worker_a.call(complete_success, run.id, a_attempt, n + 1, a_obj)

    assert run_row(run.id) == canonical
    final = Run.objects.get(id=run.id)
    assert final.state == RunState.SUCCEEDED
    assert final.accepted_attempt_id == b.current_attempt_id
    assert (final.result_key, final.result_version_id, final.result_checksum) == (
        b_obj.key, b_obj.version_id, b_obj.checksum)
    assert final.result_checksum != a_obj.checksum
    assert StoredObject.objects.get(id=b_obj.id).state == ObjectState.REFERENCED
    a_row = StoredObject.objects.get(id=a_obj.id)
    assert a_row.state == ObjectState.STAGED and a_row.referenced_at is None
    assert list(Attempt.objects.filter(run=run).order_by("number").values_list("fence", "state")) == [
        (n, AttemptState.EXPIRED), (n + 1, AttemptState.SUCCEEDED)]
    # The report email is bound to B's canonical version, once.
    intent = EffectIntent.objects.get(run=run)
    assert (intent.result_key, intent.result_version_id) == (b_obj.key, b_obj.version_id)


def test_paused_worker__upload_after_losing_fence__stale_fence_and_no_registry_row(tenant, sessions):
    worker_a, worker_b = sessions("worker-a"), sessions("worker-b")
    run = materialize_one(create_schedule(tenant))
    a = worker_a.call(authority.claim, worker_label="A")
    expire_lease(run.id)
    authority.sweep_expired_leases()
    b = worker_b.call(authority.claim, worker_label="B")
    assert b.fence == a.fence + 1

    with pytest.raises(StaleFence):
        worker_a.call(stage, a, b"late upload from A")
    assert not StoredObject.objects.filter(attempt_id=a.current_attempt_id).exists()
    worker_b.call(complete_success, run.id, b.current_attempt_id, b.fence, worker_b.call(stage, b, b"B"))
    with pytest.raises(StaleFence):
        worker_a.call(stage, a, b"later upload from A")
    assert not StoredObject.objects.filter(attempt_id=a.current_attempt_id).exists()


def test_paused_worker__repeat_upload_after_losing_fence__stale_fence(tenant, sessions):
    """API: PUT .../result with a fence that is no longer current is 409 stale_fence, so the
    worker stops. A stale worker repeating an upload it staged while current must get that too."""
    worker_a, worker_b = sessions("worker-a"), sessions("worker-b")
    run = materialize_one(create_schedule(tenant))
    a = worker_a.call(authority.claim, worker_label="A")
    a_obj = worker_a.call(stage, a, b"A's bytes")
    expire_lease(run.id)
    authority.sweep_expired_leases()
    worker_b.call(authority.claim, worker_label="B")

    with pytest.raises(StaleFence):
        worker_a.call(stage, a, b"A's bytes")  # the same bytes again: a lost PUT reply
    with pytest.raises(StaleFence):
        worker_a.call(stage, a, b"A's other bytes")
    assert StoredObject.objects.get(id=a_obj.id).state == ObjectState.STAGED


# --- 3. completion racing lease expiry and a replacement claim ------------------------

# Lease deadlines relative to the race's start (ms): some already passed, some just ahead,
# one far enough ahead that the completion must win. Each ordering happens.
DEADLINE_OFFSETS_MS = [-10, 0, 5, 10, 15, 20, 25, 30, 40, 2000]


def test_completion_racing_lease_expiry_and_replacement_claim__exactly_one_ordering_wins(tenant, sessions):
    worker_a, worker_b = sessions("worker-a"), sessions("worker-b")
    schedule = create_schedule(tenant, overlapPolicy="allow")
    wins = {"A": 0, "B": 0}

    for i in range(30):
        run = materialize_one(schedule)
        a = worker_a.call(authority.claim, worker_label="A", lease_seconds=30)
        assert a.id == run.id
        a_obj = worker_a.call(stage, a, f"A's report {i}".encode())
        set_lease_deadline(run.id, authority_now() + timedelta(milliseconds=DEADLINE_OFFSETS_MS[i % 10]))

        def a_completes():
            return complete_success(run.id, a.current_attempt_id, a.fence, a_obj)

        def sweeper_then_b_claims():
            give_up = time.monotonic() + 10
            while time.monotonic() < give_up:
                authority.sweep_expired_leases()
                claimed = authority.claim(worker_label="B", lease_seconds=30)
                if claimed is not None:
                    return claimed
                if Run.objects.filter(id=run.id, state__in=TERMINAL_STATES).exists():
                    return None
                time.sleep(0.001)
            raise AssertionError("the run neither finished nor became claimable")

        a_out, b_out = race((worker_a, a_completes), (worker_b, sweeper_then_b_claims))
        assert b_out.ok, b_out.error
        final = Run.objects.get(id=run.id)
        attempts = list(Attempt.objects.filter(run=run).order_by("number"))
        if a_out.ok:
            # A first: its result is canonical and B never got this run.
            wins["A"] += 1
            assert b_out.value is None
            assert final.state == RunState.SUCCEEDED and final.fence == a.fence
            assert final.accepted_attempt_id == a.current_attempt_id and final.result_checksum == a_obj.checksum
            assert [(x.fence, x.state) for x in attempts] == [(a.fence, AttemptState.SUCCEEDED)]
            assert StoredObject.objects.get(id=a_obj.id).state == ObjectState.REFERENCED
        else:
            # B first: it holds the next fence, and A's result can never become canonical.
            wins["B"] += 1
            assert isinstance(a_out.error, StaleFence), repr(a_out.error)
            b = b_out.value
            assert b is not None and b.id == run.id and b.fence == a.fence + 1
            assert final.state == RunState.RUNNING and final.fence == a.fence + 1
            assert final.current_attempt_id == b.current_attempt_id
            assert final.result_checksum is None and final.accepted_attempt_id is None
            assert [(x.fence, x.state) for x in attempts] == [
                (a.fence, AttemptState.EXPIRED), (a.fence + 1, AttemptState.RUNNING)]
            assert StoredObject.objects.get(id=a_obj.id).state == ObjectState.STAGED
            b_obj = worker_b.call(stage, b, f"B's report {i}".encode())
            worker_b.call(complete_success, run.id, b.current_attempt_id, b.fence, b_obj)
            with pytest.raises(StaleFence):
                worker_a.call(a_completes)
            assert Run.objects.get(id=run.id).result_checksum == b_obj.checksum
        assert StoredObject.objects.filter(run=run, state=ObjectState.REFERENCED).count() <= 1

    assert wins["A"] and wins["B"], wins


# --- 4. a lost completion reply, then a repeat ----------------------------------------


def test_lost_completion_reply__repeat__same_checksum_returns_saved_run_other_checksum_or_outcome_invalid(
    tenant, sessions
):
    worker = sessions("worker")
    run = materialize_one(create_schedule(tenant, effects=EMAIL))
    claimed = worker.call(authority.claim, worker_label="w")
    obj = worker.call(stage, claimed, b"the report")
    other = worker.call(uploads.stage_result, run_id=run.id, attempt_id=claimed.current_attempt_id,
                        fence=claimed.fence, data=b"the report", content_type="text/csv")
    assert other.id == obj.id  # re-sending the same upload is the same object

    first = worker.call(complete_success, run.id, claimed.current_attempt_id, claimed.fence, obj)
    saved, attempts, outbox = run_row(run.id), attempt_rows(run.id), Outbox.objects.count()

    again = worker.call(complete_success, run.id, claimed.current_attempt_id, claimed.fence, obj)
    assert again.state == RunState.SUCCEEDED
    assert (again.id, again.result_checksum, again.accepted_attempt_id, again.finished_at) == (
        first.id, first.result_checksum, first.accepted_attempt_id, first.finished_at)

    with pytest.raises(InvalidState):
        worker.call(authority.complete, run_id=run.id, attempt_id=claimed.current_attempt_id, fence=claimed.fence,
                    outcome="succeeded", object_key=obj.key, version_id=obj.version_id,
                    checksum="sha256:" + "0" * 64)
    for outcome in ("failed", "canceled"):
        with pytest.raises(InvalidState):
            worker.call(authority.complete, run_id=run.id, attempt_id=claimed.current_attempt_id,
                        fence=claimed.fence, outcome=outcome, error="x", retryable=False)

    assert run_row(run.id) == saved and attempt_rows(run.id) == attempts
    assert Outbox.objects.count() == outbox
    assert EffectIntent.objects.filter(run=run).count() == 1
    assert StoredObject.objects.get(id=obj.id).state == ObjectState.REFERENCED


def test_lost_completion_reply__repeat_in_flight_with_first__one_publication(tenant, sessions):
    first, second = sessions("worker"), sessions("worker-retry")
    for _ in range(10):
        run = materialize_one(create_schedule(tenant, effects=EMAIL))
        claimed = authority.claim(worker_label="w")
        obj = stage(claimed, b"bytes")

        def complete():
            return complete_success(run.id, claimed.current_attempt_id, claimed.fence, obj)

        outcomes = race((first, complete), (second, complete))
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        assert {o.value.result_checksum for o in outcomes} == {obj.checksum}
        assert EffectIntent.objects.filter(run=run).count() == 1
        assert Run.objects.get(id=run.id).state == RunState.SUCCEEDED


def test_lost_failure_reply__repeat__same_outcome_returns_saved_run_other_outcome_invalid(tenant, sessions):
    worker = sessions("worker")
    run = materialize_one(create_schedule(tenant))
    claimed = worker.call(authority.claim, worker_label="w")
    obj = worker.call(stage, claimed, b"partial")
    failed = worker.call(authority.complete, run_id=run.id, attempt_id=claimed.current_attempt_id,
                         fence=claimed.fence, outcome="failed", error="bad query", retryable=False)
    assert failed.state == RunState.FAILED
    saved = run_row(run.id)

    again = worker.call(authority.complete, run_id=run.id, attempt_id=claimed.current_attempt_id,
                        fence=claimed.fence, outcome="failed", error="bad query", retryable=False)
    assert again.state == RunState.FAILED
    with pytest.raises(InvalidState):
        worker.call(complete_success, run.id, claimed.current_attempt_id, claimed.fence, obj)
    assert run_row(run.id) == saved
    assert StoredObject.objects.get(id=obj.id).state == ObjectState.STAGED


# --- 5. cancel racing completion ------------------------------------------------------


def assert_cancel_invariants(run: Run) -> None:
    assert not (run.state == RunState.CANCELED and run.result_checksum), "canceled with a canonical result"
    assert not run.cancellation_accepted or run.state == RunState.CANCELED
    assert (run.state == RunState.SUCCEEDED) == (run.result_checksum is not None)
    assert StoredObject.objects.filter(run=run, state=ObjectState.REFERENCED).count() == (
        1 if run.state == RunState.SUCCEEDED else 0)


def test_cancel_racing_completion__succeeded_and_never_canceled_with_result(tenant, sessions):
    """A success completion is accepted whether or not a cancel was requested first (the
    cancel only asks); a cancel that comes after it is invalid_state. Never both."""
    worker, client = sessions("worker"), sessions("client")
    schedule = create_schedule(tenant, overlapPolicy="allow")
    orders = set()
    for i in range(30):
        run = materialize_one(schedule)
        claimed = worker.call(authority.claim, worker_label="w")
        obj = worker.call(stage, claimed, f"report {i}".encode())
        done, cancel = race(
            (worker, lambda: complete_success(run.id, claimed.current_attempt_id, claimed.fence, obj)),
            (client, lambda: authority.run_cancel(tenant=tenant, run_id=run.id)),
        )
        final = Run.objects.get(id=run.id)
        assert_cancel_invariants(final)
        assert done.ok, done.error
        assert final.state == RunState.SUCCEEDED and final.result_checksum == obj.checksum
        assert not final.cancellation_accepted
        if cancel.ok:
            orders.add("cancel first")
            assert cancel.value.state == RunState.RUNNING and cancel.value.cancellation_requested
            assert final.cancellation_requested
        else:
            orders.add("completion first")
            assert isinstance(cancel.error, InvalidState), repr(cancel.error)
            assert not final.cancellation_requested
    assert orders  # at least one ordering observed; which ones is up to the database


def test_cancel_racing_observing_worker__canceled_without_result_or_succeeded_with_it(tenant, sessions):
    """The worker checks its heartbeat for a cancellation request before completing, as a
    well-behaved worker does; either it accepts the cancel or it publishes, never both."""
    worker, client = sessions("worker"), sessions("client")
    schedule = create_schedule(tenant, overlapPolicy="allow")
    for i in range(30):
        run = materialize_one(schedule)
        claimed = worker.call(authority.claim, worker_label="w")
        obj = worker.call(stage, claimed, f"report {i}".encode())
        ids = dict(run_id=run.id, attempt_id=claimed.current_attempt_id, fence=claimed.fence)

        def observing_worker():
            if authority.heartbeat(**ids).cancellation_requested:
                return authority.complete(**ids, outcome="canceled")
            return complete_success(run.id, claimed.current_attempt_id, claimed.fence, obj)

        done, cancel = race((worker, observing_worker),
                            (client, lambda: authority.run_cancel(tenant=tenant, run_id=run.id)))
        final = Run.objects.get(id=run.id)
        assert done.ok, done.error
        assert_cancel_invariants(final)
        assert final.state in (RunState.SUCCEEDED, RunState.CANCELED)
        if final.state == RunState.CANCELED:
            assert final.cancellation_accepted and cancel.ok
            assert Attempt.objects.get(id=claimed.current_attempt_id).state == AttemptState.CANCELED
        elif not cancel.ok:
            assert isinstance(cancel.error, InvalidState), repr(cancel.error)


def test_cancel_racing_retryable_failure__canceled_and_no_retry_dispatched(tenant, sessions):
    worker, client = sessions("worker"), sessions("client")
    schedule = create_schedule(tenant, overlapPolicy="allow",
                               retry={"maxAttempts": 3, "initialDelaySeconds": 0, "maxDelaySeconds": 0})
    for _ in range(20):
        run = materialize_one(schedule)
        claimed = worker.call(authority.claim, worker_label="w")
        failed, cancel = race(
            (worker, lambda: authority.complete(run_id=run.id, attempt_id=claimed.current_attempt_id,
                                                fence=claimed.fence, outcome="failed", error="flaky",
                                                retryable=True)),
            (client, lambda: authority.run_cancel(tenant=tenant, run_id=run.id)),
        )
        assert failed.ok and cancel.ok, (failed.error, cancel.error)
        authority.promote_due_runs()
        assert authority.claim(worker_label="w") is None
        final = Run.objects.get(id=run.id)
        assert final.state == RunState.CANCELED and final.cancellation_accepted
        assert final.attempt_count == 1 and not final.holds_guard
        assert_cancel_invariants(final)


def test_cancel_requested_then_lease_expires__canceled_and_late_result_rejected(tenant, sessions):
    worker, client = sessions("worker"), sessions("client")
    run = materialize_one(create_schedule(tenant))
    claimed = worker.call(authority.claim, worker_label="w")
    obj = worker.call(stage, claimed, b"late")
    assert client.call(authority.run_cancel, tenant=tenant, run_id=run.id).cancellation_requested
    expire_lease(run.id)
    assert authority.sweep_expired_leases() == 1
    with pytest.raises(StaleFence):
        worker.call(complete_success, run.id, claimed.current_attempt_id, claimed.fence, obj)
    final = Run.objects.get(id=run.id)
    assert final.state == RunState.CANCELED and final.cancellation_accepted and final.result_checksum is None
    assert_cancel_invariants(final)
    assert authority.claim(worker_label="w") is None
