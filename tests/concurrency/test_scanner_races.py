"""A second scanner: overlapping scanners create each occurrence once.

Every scanner here is its own PostgreSQL session. The unique (schedule, scheduled_at)
key is what makes this safe; SKIP LOCKED only keeps scanners from doing the work twice.
"""

from collections import Counter
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction

from runs import authority
from runs.authority.materialize import _materialize
from kernel.clock import authority_now
from runs.models import Outbox, Run, RunState, Trigger
from schedules.models import Schedule
from tests.authority_steps import create_schedule, make_due
from tests.concurrency.harness import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_scanners__same_instant__one_occurrence(tenant, sessions):
    scanners = [sessions("scanner-1"), sessions("scanner-2")]
    schedule = create_schedule(tenant)
    for _ in range(15):
        instant = make_due(schedule)
        outcomes = race(*[(scanner, authority.materialize_due) for scanner in scanners])

        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        assert sum(o.value.queued for o in outcomes) == 1
        runs = list(Run.objects.filter(schedule=schedule, scheduled_at=instant))
        assert len(runs) == 1
        assert Outbox.objects.filter(run=runs[0], kind="dispatch").count() == 1
        schedule.refresh_from_db()
        assert schedule.next_run_at > authority_now()
        # Leave the guard free for the next instant.
        authority.run_cancel(tenant=tenant, run_id=runs[0].id)
    assert Run.objects.filter(schedule=schedule).count() == 15


def test_concurrent_scanners__300_due_schedules__each_materialized_exactly_once(tenant, sessions):
    schedules = [create_schedule(tenant, name=f"s{i}") for i in range(300)]
    base = authority_now() - timedelta(seconds=5)
    expected = {}
    for i, schedule in enumerate(schedules):
        # Distinct instants, so a scanner batch spans several schedules in due order.
        instant = base - timedelta(milliseconds=i)
        Schedule.objects.filter(id=schedule.id).update(next_run_at=instant)
        expected[schedule.id] = instant

    def scan_until_nothing_due():
        queued = 0
        for _ in range(1000):
            stats = authority.materialize_due(batch_size=25)
            queued += stats.queued
            if stats.schedules == 0 and not Schedule.objects.filter(next_run_at__lte=authority_now()).exists():
                return queued
        raise AssertionError("scanner never finished")

    scanners = [sessions(f"scanner-{i}") for i in range(4)]
    outcomes = race(*[(scanner, scan_until_nothing_due) for scanner in scanners])

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sum(o.value for o in outcomes) == 300
    runs = list(Run.objects.filter(tenant=tenant).values_list("schedule_id", "scheduled_at", "state"))
    assert len(runs) == 300
    assert Counter(sid for sid, _, _ in runs) == Counter({sid: 1 for sid in expected})
    assert {sid: at for sid, at, _ in runs} == expected
    assert {state for _, _, state in runs} == {RunState.QUEUED}
    assert Outbox.objects.filter(kind="dispatch").count() == 300
    assert not Schedule.objects.filter(next_run_at__lte=authority_now()).exists()
    # The work was actually shared: more than one scanner created occurrences.
    assert sum(1 for o in outcomes if o.value) >= 2


def test_stale_scanner__same_instant__rejected_by_unique_occurrence_key(tenant):
    """A scanner that read the schedule before another one advanced it (no lock, the
    baseline's flaw) cannot insert a second occurrence: the whole batch rolls back."""
    schedule = create_schedule(tenant)
    instant = make_due(schedule)
    stale_copy = Schedule.objects.get(id=schedule.id)
    assert authority.materialize_due().queued == 1

    with pytest.raises(IntegrityError), transaction.atomic():
        _materialize([stale_copy], authority_now())

    assert Run.objects.filter(schedule=schedule).count() == 1
    assert Run.objects.get(schedule=schedule).scheduled_at == instant
    assert Outbox.objects.filter(kind="dispatch").count() == 1


def test_occurrence_key__raw_duplicate_insert__integrity_error(tenant):
    schedule = create_schedule(tenant)
    instant = make_due(schedule)
    authority.materialize_due()
    original = Run.objects.get(schedule=schedule)

    duplicate = dict(
        schedule_id=schedule.id, tenant_id=tenant.id, trigger=Trigger.SCHEDULE, revision=1, payload={},
        job_type="demo.sleep", resource_class="short", state=RunState.QUEUED, scheduled_at=instant, due_at=instant,
        created_at=authority_now(),
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(**duplicate)
    assert list(Run.objects.filter(schedule=schedule)) == [original]
    # Run-once occurrences are keyed by their request key instead, so the same instant is allowed.
    Run.objects.create(**{**duplicate, "trigger": Trigger.MANUAL})
    assert Run.objects.filter(schedule=schedule).count() == 2
