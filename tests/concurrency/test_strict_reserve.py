"""Capacity reserved for strict runs (STRICT_RESERVED_SHARE), claimed from several
PostgreSQL sessions: strict runs come first within a tenant's share, ordinary claims stop at
the reserve exactly while claimers race, and strict work still takes the reserved slots."""

import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection

from runs import authority
from runs.capacity.live import slots_report
from runs.models import Outbox, Run, RunState
from tests.authority_steps import complete_success, create_schedule, make_due, stage
from tests.concurrency.harness import race
from tests.concurrency.test_claim_races import claim_until_dry, queue_manual_runs
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reserve(settings):
    """10 live short slots, 20 % of them reserved: at most 8 ordinary runs running."""
    settings.STRICT_RESERVED_SHARE = 0.2
    slots_report("worker:test:1", {"short": 10})


def strict_runs(tenant, count: int, *, ago=timedelta(seconds=1)) -> list[str]:
    """``count`` queued occurrences of strict schedules (startDeadlineSeconds), due ``ago``."""
    ids = []
    for i in range(count):
        schedule = create_schedule(tenant, name=f"strict-{tenant.name}-{i}-{ago.total_seconds()}",
                                   startDeadlineSeconds=60, overlapPolicy="allow")
        instant = make_due(schedule, ago=ago)
        authority.materialize_due()
        ids.append(Run.objects.get(schedule=schedule, scheduled_at=instant).id)
    assert Run.objects.filter(id__in=ids, state=RunState.QUEUED, strict=True).count() == count
    return ids


def running(*, strict: bool) -> int:
    return Run.objects.filter(state=RunState.RUNNING, strict=strict).count()


def test_strict_runs__claimed_before_older_ordinary_ones(reserve):
    tenant = make_tenant("acme")
    queue_manual_runs(tenant, 5)  # ordinary, older
    strict = strict_runs(tenant, 2, ago=timedelta(milliseconds=1))
    assert sorted(r.id for r in authority.claim_many(n=2, worker_label="w")) == sorted(strict)


def test_strict_runs__first_within_fair_share_across_tenants(reserve):
    plain, urgent = make_tenant("plain"), make_tenant("urgent")
    queue_manual_runs(plain, 3)
    strict = strict_runs(urgent, 2, ago=timedelta(milliseconds=1))
    queue_manual_runs(urgent, 3)
    # One slot: the tenant with strict work waiting gets it, though plain's run is older.
    assert [r.id for r in authority.claim_many(n=1, worker_label="w")] == strict[:1]
    # Fair share still splits a batch: each tenant gets two, urgent's strict one first.
    batch = authority.claim_many(n=4, worker_label="w")
    assert Counter(r.tenant_id for r in batch) == {plain.id: 2, urgent.id: 2}
    assert strict[1] in {r.id for r in batch}


def test_racing_claimers__ordinary_stop_at_the_reserve__strict_take_the_reserved_slots(reserve, sessions):
    a, b = make_tenant("a", max_active_runs=100), make_tenant("b", max_active_runs=100)
    ordinary = queue_manual_runs(a, 12) + queue_manual_runs(b, 12)

    claimers = [sessions(f"claimer-{i}") for i in range(4)]
    outcomes = race(*((s, lambda: claim_until_dry(3)) for s in claimers))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    claimed = [run_id for o in outcomes for run_id, *_ in o.value]
    assert len(claimed) == len(set(claimed)) == 8, "ordinary claims went past (1 - 0.2) x 10 slots"
    assert running(strict=False) == 8 and Run.objects.filter(id__in=ordinary, state=RunState.QUEUED).count() == 16

    strict = strict_runs(a, 1) + strict_runs(b, 1)
    outcomes = race(*((s, lambda: claim_until_dry(3)) for s in claimers))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sorted(run_id for o in outcomes for run_id, *_ in o.value) == sorted(strict)
    assert (running(strict=True), running(strict=False)) == (2, 8)

    # An ordinary run that ends frees exactly one ordinary slot.
    done = Run.objects.filter(state=RunState.RUNNING, strict=False).first()
    complete_success(done.id, done.current_attempt_id, done.fence, stage(done, b"done"))
    again = authority.claim_many(n=5, worker_label="w")
    assert len(again) == 1 and not again[0].strict and running(strict=False) == 8


@pytest.mark.usefixtures("file_objects")
def test_reserve__without_live_slots_or_with_share_zero__reserves_nothing(settings, tenant):
    settings.STRICT_RESERVED_SHARE = 0.2
    queue_manual_runs(tenant, 12)
    assert len(authority.claim_many(n=6, worker_label="w")) == 6  # no slots reported: no reserve
    slots_report("worker:test:1", {"short": 5})
    settings.STRICT_RESERVED_SHARE = 0.0
    assert len(authority.claim_many(n=6, worker_label="w")) == 6  # 12 running on 5 slots: no reserve


def _wait_until(done, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _backend_pid() -> int:
    connection.ensure_connection()
    return connection.connection.info.backend_pid


def _waits_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def test_claimers_of_different_tenants__cannot_both_take_the_last_ordinary_slots(reserve, sessions):
    """Claimer X has claimed the class's last 8 ordinary slots (for tenant a) and not yet
    committed; claimer Y serves tenant b, which X does not lock. Y must not read the running
    count from before X's commit: it waits for X, then finds the class full."""
    a, b = make_tenant("a"), make_tenant("b")
    queue_manual_runs(a, 8)
    holder, x, y = sessions("holds-an-outbox-row"), sessions("claimer-x"), sessions("claimer-y")
    x_pid, y_pid = x.call(_backend_pid), y.call(_backend_pid)
    # X's last statement (marking its dispatch intents) waits for this row.
    with holder.holding(lambda: Outbox.objects.select_for_update(of=("self",)).filter(
            run__tenant=a, processed_at__isnull=True).first()):
        x_claims = x.submit(lambda: authority.claim_many(n=8, worker_label="x"))
        _wait_until(lambda: _waits_on_a_lock(x_pid))  # X holds its 8 claims, uncommitted
        older = Run.objects.filter(tenant=a).order_by("due_at").first().due_at - timedelta(seconds=1)
        Run.objects.filter(id__in=queue_manual_runs(b, 2)).update(due_at=older)  # Y serves b first
        y_claims = y.submit(lambda: authority.claim_many(n=1, worker_label="y"))
        _wait_until(lambda: y_claims.done() or _waits_on_a_lock(y_pid))
    assert len(x_claims.result(30)) == 8
    assert y_claims.result(30) == [] and running(strict=False) == 8
