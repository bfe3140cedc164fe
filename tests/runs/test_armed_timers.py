"""Armed timers against PostgreSQL (runs/authority/armed_timers.py): a timer due soon is read
ahead without a lock and fired by one guarded statement per batch. The guard is the only
thing that makes that safe, so each change a schedule can undergo after arming is made
here, and what is written must be what the schedule says at the instant: a new revision's
payload, nothing after a pause or a delete, nothing at a moved instant, one occurrence
when two scanners fire, the misfire policy when the timer fires late."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from kernel.clock import authority_now
from runs import authority
from runs.models import Outbox, PendingReason, Run, RunState, SkipReason
from runs.timers import Timers, fire
from schedule_services.lifecycle import schedule_delete, schedule_pause, schedule_update
from schedules.jitter import jittered
from schedules.models import Schedule
from schedules.specs import ScheduleSpec
from tests.authority_steps import create_schedule
from tests.concurrency.harness import Session

pytestmark = pytest.mark.django_db

ALL = range(settings.DUE_BUCKETS)


def allow(tenant, **extra):
    """A schedule whose overlap policy takes no guard: the kind a timer fires armed."""
    return create_schedule(tenant, overlapPolicy="allow", **extra)


def due_in(schedules, seconds: float):
    instant = authority_now() + timedelta(seconds=seconds)
    Schedule.objects.filter(id__in=[s.id for s in schedules]).update(next_run_at=instant)
    return instant


def armed_timers(schedules, seconds: float = 0.4) -> tuple[Timers, object]:
    instant = due_in(schedules, seconds)
    timers = Timers()
    timers.load(ALL)
    assert set(timers.armed) == {s.id for s in schedules}
    return timers, instant


def wait_and_fire(timers: Timers, **options):
    time.sleep(timers.seconds_to_next() or 0)
    return fire(timers, timers.pop_due(), **options)


def test_armed__fired_by_one_guarded_statement__the_row_locked_and_moved_on(tenant):
    schedule = allow(tenant)
    timers, instant = armed_timers([schedule])

    with CaptureQueriesContext(connection) as queries:
        stats = wait_and_fire(timers)

    statements = [q["sql"] for q in queries.captured_queries]
    assert sum(s.startswith("WITH due AS") for s in statements) == 1
    assert not any("FOR UPDATE SKIP LOCKED" in s and not s.startswith("WITH") for s in statements)
    run = Run.objects.get(schedule=schedule)
    assert (stats.queued, run.state, run.scheduled_at, run.revision) == (1, RunState.QUEUED, instant, 1)
    assert run.payload["params"] == {"seconds": 0} and run.payload["resourceClass"] == "short"
    assert Outbox.objects.get(run=run).action_key == f"dispatch-{run.id}"
    assert Schedule.objects.get(id=schedule.id).next_run_at > instant
    assert timers.armed == {}


def test_armed__edited_after_arming__written_with_the_new_revision_and_payload(tenant):
    schedule = allow(tenant, params={"seconds": 1})
    timers, instant = armed_timers([schedule])
    schedule_update(tenant=tenant, schedule_id=schedule.id, expected_revision=1,
                    changes=ScheduleSpec(params={"seconds": 7}))

    wait_and_fire(timers)

    run = Run.objects.get(schedule=schedule)
    assert run.revision == 2 and run.payload["params"] == {"seconds": 7} and run.scheduled_at == instant


def test_armed__paused_or_deleted_after_arming__nothing_written(tenant):
    paused, deleted = allow(tenant, name="paused"), allow(tenant, name="deleted")
    timers, _ = armed_timers([paused, deleted])
    schedule_pause(tenant=tenant, schedule_id=paused.id)
    schedule_delete(tenant=tenant, schedule_id=deleted.id)

    stats = wait_and_fire(timers)

    assert not stats and not Run.objects.exists() and not Outbox.objects.exists()


def test_armed__instant_moved_after_arming__nothing_at_the_old_one(tenant):
    schedule = allow(tenant)
    timers, _ = armed_timers([schedule])
    later = due_in([schedule], 30)

    wait_and_fire(timers)

    assert not Run.objects.exists()
    assert Schedule.objects.get(id=schedule.id).next_run_at == later


def test_armed__two_scanners_fire_the_same_instant__one_occurrence(tenant):
    schedule = allow(tenant)
    first, instant = armed_timers([schedule])
    second = Timers()
    second.load(ALL)

    wait_and_fire(first)
    wait_and_fire(second)

    assert Run.objects.filter(schedule=schedule, scheduled_at=instant).count() == 1
    assert Outbox.objects.count() == 1


def test_armed__fired_past_the_misfire_grace__the_misfire_policy_decides(tenant):
    schedule = allow(tenant, misfirePolicy="skip", misfireGraceSeconds=0)
    timers, instant = armed_timers([schedule], seconds=0.2)

    time.sleep(0.5)  # the scanner was busy: the timer fires late
    wait_and_fire(timers)

    run = Run.objects.get(schedule=schedule)
    assert (run.state, run.skip_reason, run.scheduled_at) == (RunState.SKIPPED, SkipReason.MISFIRE, instant)
    assert not Outbox.objects.exists()


def test_armed__jittered__pending_until_its_own_due_instant(tenant):
    schedule = allow(tenant, jitterSeconds=3600)
    timers, instant = armed_timers([schedule])

    wait_and_fire(timers)

    run = Run.objects.get(schedule=schedule)
    due = jittered(schedule.id, instant, 3600)
    assert run.due_at == due
    if due > run.created_at:
        assert (run.state, run.pending_reason) == (RunState.PENDING, PendingReason.NOT_DUE)
        assert not Outbox.objects.exists()
    else:
        assert run.state == RunState.QUEUED


def test_armed__a_guarded_overlap_policy__never_armed(tenant):
    guarded = create_schedule(tenant, overlapPolicy="skip")
    due_in([guarded], 0.4)
    timers = Timers()
    timers.load(ALL)

    assert timers.armed == {}
    wait_and_fire(timers)
    assert Run.objects.filter(schedule=guarded).count() == 1


@pytest.mark.django_db(transaction=True)
def test_armed__a_wave_over_two_connections__each_instant_once(tenant):
    schedules = [allow(tenant, name=f"w{i}") for i in range(130)]
    timers, instant = armed_timers(schedules, seconds=0.6)

    try:
        stats = wait_and_fire(timers, batch_size=30)  # 30 here, then 30, 30, 30 and 10 over the fire connections
    finally:
        timers.close()

    assert (stats.schedules, stats.queued) == (130, 130)
    assert Run.objects.filter(scheduled_at=instant, state=RunState.QUEUED).count() == 130
    assert Outbox.objects.count() == 130
    assert not Schedule.objects.filter(next_run_at__lte=instant).exists()


@pytest.mark.django_db(transaction=True)
def test_armed__a_row_locked_at_the_instant__left_to_the_poll(tenant):
    schedule = allow(tenant)
    timers, instant = armed_timers([schedule])
    holder = Session("holder")
    try:
        with holder.holding(lambda: Schedule.objects.select_for_update().get(id=schedule.id)):
            stats = wait_and_fire(timers)
    finally:
        holder.close()

    assert not stats and not Run.objects.exists()
    authority.materialize_due()  # the poll, once the lock is gone
    assert Run.objects.get(schedule=schedule).scheduled_at == instant
