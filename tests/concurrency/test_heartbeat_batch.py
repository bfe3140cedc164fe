"""One heartbeat per process: heartbeat_many extends every held lease in one statement,
refuses each attempt that lost its run on its own, and never revives a passed lease."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import authority
from runs.models import Attempt, Run, RunState
from tests.authority_steps import create_schedule, expire_lease, make_due
from workers.jobs.framework import JobControl
from workers.leases import LeaseKeeper

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_runs(tenant, n: int, *, lease_seconds: int = 30) -> list[Run]:
    schedule = create_schedule(tenant, overlapPolicy="allow")
    for _ in range(n):  # n instants of one schedule, each claimable
        make_due(schedule, ago=timedelta(seconds=1 + _))
        authority.materialize_due()
    runs = authority.claim_many(n=n, worker_label="w", lease_seconds=lease_seconds)
    assert len(runs) == n
    return runs


def held(runs) -> list[tuple[str, int]]:
    return [(r.current_attempt_id, r.fence) for r in runs]


def test_heartbeat_many__extends_every_lease_in_one_statement(tenant):
    runs = claimed_runs(tenant, 20, lease_seconds=30)
    before = {r.id: Run.objects.get(id=r.id).lease_expires_at for r in runs}
    with CaptureQueriesContext(connection) as queries:
        alive = authority.heartbeat_many(held(runs))
    statements = [q["sql"] for q in queries.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(statements) == 1, statements
    assert alive == {r.current_attempt_id: False for r in runs}
    for run in runs:
        stored = Run.objects.get(id=run.id)
        assert stored.lease_expires_at > before[run.id]
        assert Attempt.objects.get(id=run.current_attempt_id).lease_expires_at == stored.lease_expires_at


def test_heartbeat_many__one_expired_lease__refused_alone_and_not_revived(tenant):
    runs = claimed_runs(tenant, 5)
    expired = runs[2]
    expire_lease(expired.id)
    passed = Run.objects.get(id=expired.id).lease_expires_at

    alive = authority.heartbeat_many(held(runs))

    assert set(alive) == {r.current_attempt_id for r in runs} - {expired.current_attempt_id}
    assert Run.objects.get(id=expired.id).lease_expires_at == passed  # a passed lease stays passed
    assert authority.sweep_expired_leases() == 1
    assert Run.objects.get(id=expired.id).state == RunState.QUEUED


def test_heartbeat_many__stale_fence_and_cancellation_come_back_per_attempt(tenant):
    runs = claimed_runs(tenant, 3)
    stale = runs[0]
    authority.run_cancel(tenant=tenant, run_id=runs[1].id)  # running: cancellation requested

    alive = authority.heartbeat_many([(stale.current_attempt_id, stale.fence + 1)] + held(runs[1:]))

    assert alive == {runs[1].current_attempt_id: True, runs[2].current_attempt_id: False}


def test_lease_keeper__one_beat_for_all_held_attempts_relays_answers(tenant):
    runs = claimed_runs(tenant, 4)
    keeper = LeaseKeeper()  # not the process's: beats only when this test says so
    controls = {}
    for run in runs:
        controls[run.id] = JobControl()
        keeper.hold(run.current_attempt_id, run.fence, lease_seconds=30, interval=3600,
                    control=controls[run.id], claimed_at=0)
    authority.run_cancel(tenant=tenant, run_id=runs[0].id)
    expire_lease(runs[1].id)
    runs_before = {r.id: Run.objects.get(id=r.id).lease_expires_at for r in runs[2:]}

    with CaptureQueriesContext(connection) as queries:
        keeper.beat()

    assert len([q for q in queries.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]) == 1
    assert controls[runs[0].id].cancel_requested.is_set()
    assert controls[runs[1].id].lost.is_set() and not keeper.holding(runs[1].current_attempt_id)
    for run in runs[2:]:
        assert not controls[run.id].lost.is_set() and keeper.holding(run.current_attempt_id)
        assert Run.objects.get(id=run.id).lease_expires_at > runs_before[run.id]


def test_lease_keeper__a_completing_attempt_missing_from_the_answer_is_not_lost(tenant):
    [run] = claimed_runs(tenant, 1)
    keeper, control = LeaseKeeper(), JobControl()
    keeper.hold(run.current_attempt_id, run.fence, lease_seconds=30, interval=3600, control=control, claimed_at=0)
    keeper.completing(run.current_attempt_id)
    authority.run_cancel(tenant=tenant, run_id=run.id)
    authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="canceled")

    keeper.beat()  # the run ended between the snapshot and the answer: not a loss

    assert not control.lost.is_set()


def test_lease_keeper__lease_certainly_passed_a_lease_after_the_last_answer():
    keeper = LeaseKeeper()
    keeper.hold("att_x", 1, lease_seconds=30, interval=3600, control=JobControl(), claimed_at=time.monotonic() - 31)
    keeper.hold("att_y", 1, lease_seconds=30, interval=3600, control=JobControl(), claimed_at=time.monotonic())
    assert not keeper.lease_may_be_valid("att_x")  # granted more than a lease ago
    assert keeper.lease_may_be_valid("att_y") and not keeper.lease_may_be_valid("att_unknown")
