"""Claims from several PostgreSQL sessions: each run claimed once, tenants served fairly,
a tenant's active-run limit held exactly while claimers race, and claims for different
tenants never waiting on each other."""

from collections import Counter
from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs import authority
from runs.models import Attempt, Outbox, Run, RunState
from schedules import recurrence
from schedules.models import Schedule, Tenant
from tests.authority_steps import complete_success, create_schedule, stage
from tests.concurrency.harness import lock_timeout, race
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def queue_manual_runs(tenant, count: int, *, per_schedule: int = 10) -> list[str]:
    """``count`` queued run-once occurrences over schedules that allow overlap."""
    ids = []
    schedule = None
    for i in range(count):
        if i % per_schedule == 0:
            schedule = create_schedule(tenant, name=f"{tenant.name}-{i}", overlapPolicy="allow")
        run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
        ids.append(run.id)
    assert Run.objects.filter(id__in=ids, state=RunState.QUEUED).count() == count
    return ids


def claim_until_dry(n: int):
    """A claimer's loop: claim batches until a claim finds nothing. Returns what it got."""
    got = []
    for _ in range(1000):
        batch = authority.claim_many(n=n, worker_label="claimer", lease_seconds=300)
        if not batch:
            return got
        got.extend((run.id, run.fence, run.current_attempt_id, run.tenant_id) for run in batch)
    raise AssertionError("claimer never ran dry")


def test_two_claimers__200_queued_runs__each_claimed_exactly_once(sessions):
    tenant = make_tenant("big", max_active_runs=1000)
    ids = queue_manual_runs(tenant, 200)

    outcomes = race((sessions("claimer-1"), lambda: claim_until_dry(10)),
                    (sessions("claimer-2"), lambda: claim_until_dry(10)))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    claimed = [c for o in outcomes for c in o.value]
    by_run = Counter(run_id for run_id, *_ in claimed)
    assert sorted(by_run) == sorted(ids) and set(by_run.values()) == {1}, "a run was claimed twice or never"
    assert {fence for _, fence, _, _ in claimed} == {1}
    assert all(o.value for o in outcomes), "one claimer got nothing: the test did not race"
    rows = Run.objects.filter(id__in=ids)
    assert set(rows.values_list("state", "fence", "attempt_count")) == {(RunState.RUNNING, 1, 1)}
    assert Attempt.objects.filter(run_id__in=ids).count() == 200
    assert {a for _, _, a, _ in claimed} == set(rows.values_list("current_attempt_id", flat=True))
    # Every dispatch intent was consumed by its claim.
    assert not Outbox.objects.filter(run_id__in=ids, kind="dispatch", processed_at__isnull=True).exists()


def queue_backlog(tenant, minutes: int) -> None:
    """A run_all schedule that missed ``minutes`` minutes: that many old queued occurrences."""
    schedule = create_schedule(tenant, name="backlog", cron="* * * * *", misfirePolicy="run_all",
                               overlapPolicy="allow")
    rule = recurrence.parse_rule(schedule.recurrence)
    start = recurrence.next_after(rule, authority_now() - timedelta(minutes=minutes))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=start)
    while Schedule.objects.get(id=schedule.id).next_run_at <= authority_now():
        authority.materialize_due()


def test_weighted_fair_claim__small_tenant_served_in_first_batch(db):
    big = make_tenant("big")
    small = make_tenant("small")
    queue_backlog(big, 500)
    assert Run.objects.filter(tenant=big, state=RunState.QUEUED).count() >= 500
    small_ids = queue_manual_runs(small, 5)
    # Strict FIFO would hand all ten slots to the older backlog.
    assert Run.objects.filter(tenant=big, state=RunState.QUEUED).order_by("due_at")[9].due_at < min(
        Run.objects.filter(id__in=small_ids).values_list("due_at", flat=True))

    batch = authority.claim_many(n=10, worker_label="w")

    by_tenant = Counter(run.tenant_id for run in batch)
    assert by_tenant == {big.id: 5, small.id: 5}
    assert {run.id for run in batch if run.tenant_id == small.id} == set(small_ids)
    # The big tenant's share went to its oldest runs.
    oldest = list(Run.objects.filter(tenant=big).order_by("due_at", "id").values_list("id", flat=True)[:5])
    assert {run.id for run in batch if run.tenant_id == big.id} == set(oldest)


def test_weighted_fair_claim__weights_split_the_batch(db):
    heavy = make_tenant("heavy", weight=3)
    light = make_tenant("light", weight=1)
    queue_manual_runs(light, 10)
    queue_manual_runs(heavy, 10)
    batch = authority.claim_many(n=8, worker_label="w")
    assert Counter(run.tenant_id for run in batch) == {heavy.id: 6, light.id: 2}


def test_max_active_runs__two_concurrent_claimers__limited_tenant_passed_over(sessions):
    limited = make_tenant("limited", max_active_runs=3)
    other = make_tenant("other")
    limited_ids = queue_manual_runs(limited, 10)
    other_ids = queue_manual_runs(other, 10)

    outcomes = race((sessions("claimer-1"), lambda: claim_until_dry(4)),
                    (sessions("claimer-2"), lambda: claim_until_dry(4)))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    claimed = Counter(tenant_id for o in outcomes for *_, tenant_id in o.value)
    assert claimed == {limited.id: 3, other.id: 10}
    assert Run.objects.filter(id__in=limited_ids, state=RunState.RUNNING).count() == 3
    # Passed over, not failed or hidden: the rest stay queued.
    assert Run.objects.filter(id__in=limited_ids, state=RunState.QUEUED).count() == 7
    assert Run.objects.filter(id__in=other_ids, state=RunState.RUNNING).count() == 10
    assert authority.claim_many(n=10, worker_label="w") == []

    # Finishing one frees exactly one slot.
    running = Run.objects.filter(id__in=limited_ids, state=RunState.RUNNING).first()
    complete_success(running.id, running.current_attempt_id, running.fence, stage(running, b"done"))
    again = authority.claim_many(n=10, worker_label="w")
    assert [run.tenant_id for run in again] == [limited.id]
    assert Run.objects.filter(id__in=limited_ids, state=RunState.RUNNING).count() == 3


def test_claim__a_tenant_locked_by_another_claimer__does_not_hold_up_other_tenants(sessions):
    """Only the tenants that get slots are locked: while another session holds the busy
    tenant's row (a claimer serving it, mid-transaction), a claim for the other goes ahead."""
    busy, other = make_tenant("busy"), make_tenant("other")
    queue_manual_runs(busy, 3)
    other_ids = queue_manual_runs(other, 1)
    assert authority.claim(worker_label="w").tenant_id == busy.id  # busy now has one running

    # Another claimer serving busy, mid-transaction; a wait for busy's row fails the test.
    with sessions("claimer-serving-busy").holding(lambda: Tenant.objects.select_for_update().get(id=busy.id)), \
            lock_timeout(3):
        got = authority.claim_many(n=1, worker_label="w")

    assert [run.id for run in got] == other_ids


def test_claim_holding_a_tenant__its_runs_are_materialized_meanwhile(sessions):
    """A claim holds its tenant's row until it commits (statements.claim.tenants_lock). Rows that
    merely refer to the tenant (a run the scanner materializes: its foreign-key check at
    commit) do not wait for it: the claim's lock is NO KEY UPDATE, not FOR UPDATE."""
    from runs.authority.statements.claim import tenants_lock

    tenant = make_tenant("busy")
    schedule = create_schedule(tenant, name="due", overlapPolicy="allow")
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))

    def claim_in_progress():
        assert tenants_lock([tenant.id], skip_locked=False) == {tenant.id}

    # A wait for the tenant's row fails the test.
    with sessions("claimer").holding(claim_in_progress), lock_timeout(3):
        authority.materialize_due()
    assert Run.objects.filter(schedule_id=schedule.id, state=RunState.QUEUED).count() == 1
