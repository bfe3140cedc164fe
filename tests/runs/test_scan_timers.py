"""The timer horizon against PostgreSQL: instants of the next minute are loaded from the due
index and fired at their instant without searching; what is fired is the schedule as it is
under the lock then (an edit, a pause or a moved instant after loading is never lost nor
run stale); a fresh set of timers (a restart) is rebuilt from the due index."""

import time
from datetime import timedelta

import pytest
from django.conf import settings

from kernel.clock import authority_now
from runs.models import Run
from runs.scanner import ScanLoop
from runs.timers import FIRST_CHUNK, Timers, fire
from schedule_services.lifecycle import schedule_pause, schedule_update
from schedules.models import Schedule
from schedules.specs import ScheduleSpec
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db

ALL = range(settings.DUE_BUCKETS)


def due_in(schedule, seconds: float):
    """Time passes until the schedule's next instant is ``seconds`` away."""
    instant = authority_now() + timedelta(seconds=seconds)
    Schedule.objects.filter(id=schedule.id).update(next_run_at=instant)
    return instant


def wait_and_fire(timers: Timers) -> list[str]:
    time.sleep(timers.seconds_to_next() or 0)
    fired = timers.pop_due()
    fire(timers, fired)
    return fired


def test_timers__fired_at_the_instant__one_occurrence_with_little_lateness(tenant):
    schedule = create_schedule(tenant)
    instant = due_in(schedule, 0.4)
    timers = Timers()
    assert timers.load(ALL) == 1
    assert timers.pop_due() == []  # not yet

    assert wait_and_fire(timers) == [schedule.id]

    run = Run.objects.get(schedule=schedule)
    assert run.scheduled_at == instant
    assert (run.created_at - instant).total_seconds() < 0.25
    assert timers.pop_due() == [] and len(timers) == 0  # the next instant is months away


def test_timers__only_the_horizon_and_the_buckets_given(tenant):
    near, far, elsewhere = (create_schedule(tenant, name=n) for n in ("near", "far", "elsewhere"))
    due_in(near, 30)
    due_in(far, 90)
    due_in(elsewhere, 30)
    Schedule.objects.filter(id=elsewhere.id).update(bucket=(near.bucket + 1) % settings.DUE_BUCKETS)

    timers = Timers(horizon_seconds=60)
    timers.load([near.bucket])
    assert [schedule_id for _, schedule_id in timers.heap] == [near.id]


def test_timers__edited_after_loading__fired_with_the_new_revision_and_payload(tenant):
    schedule = create_schedule(tenant, params={"seconds": 1})
    due_in(schedule, 0.4)
    timers = Timers()
    timers.load(ALL)
    schedule_update(tenant=tenant, schedule_id=schedule.id, expected_revision=1,
                    changes=ScheduleSpec(params={"seconds": 7}))

    wait_and_fire(timers)

    run = Run.objects.get(schedule=schedule)
    assert run.revision == 2 and run.payload["params"] == {"seconds": 7}


def test_timers__paused_after_loading__nothing_materialized(tenant):
    schedule = create_schedule(tenant)
    due_in(schedule, 0.3)
    timers = Timers()
    timers.load(ALL)
    schedule_pause(tenant=tenant, schedule_id=schedule.id)

    assert wait_and_fire(timers) == [schedule.id]
    assert not Run.objects.filter(schedule=schedule).exists()


def test_timers__instant_moved_later_after_loading__not_run_at_the_old_one(tenant):
    schedule = create_schedule(tenant)
    due_in(schedule, 0.3)
    timers = Timers()
    timers.load(ALL)
    later = due_in(schedule, 30)  # an edit moved the next instant

    wait_and_fire(timers)
    assert not Run.objects.filter(schedule=schedule).exists()
    assert Schedule.objects.get(id=schedule.id).next_run_at == later


def test_timers__a_restart__rebuilt_from_the_due_index(tenant):
    schedules = [create_schedule(tenant, name=f"s{i}") for i in range(3)]
    for i, schedule in enumerate(schedules):
        due_in(schedule, 20 + i)
    before = Timers()
    before.load(ALL)

    rebuilt = Timers()  # a new process: nothing in memory
    assert rebuilt.load(ALL) == 3
    assert rebuilt.heap == before.heap


def test_timers__a_wave__fired_in_batches_each_schedule_once(tenant):
    schedules = [create_schedule(tenant, name=f"w{i}") for i in range(130)]
    instant = authority_now() + timedelta(seconds=0.5)
    Schedule.objects.filter(id__in=[s.id for s in schedules]).update(next_run_at=instant)
    timers = Timers()
    assert timers.load(ALL) == 130

    time.sleep(timers.seconds_to_next())
    fired = timers.pop_due()
    stats = fire(timers, fired, batch_size=60)  # transactions of 10, 60 and 60

    assert stats.queued == 130 and stats.schedules == 130
    assert Run.objects.filter(schedule__in=schedules, scheduled_at=instant).count() == 130


def test_scan_loop__a_wave__its_first_few_committed_before_the_rest_are_popped(tenant):
    schedules = [create_schedule(tenant, name=f"w{i}") for i in range(3 * FIRST_CHUNK)]
    instant = authority_now() + timedelta(seconds=0.5)
    Schedule.objects.filter(id__in=[s.id for s in schedules]).update(next_run_at=instant)
    loop = ScanLoop(buckets=ALL)
    loop.timers.load(ALL)
    popped = []
    pop_due = loop.timers.pop_due
    loop.timers.pop_due = lambda limit=None: popped.append(  # what was written when each pop began
        Run.objects.filter(schedule__in=schedules).count()) or pop_due(limit)

    time.sleep(loop.timers.seconds_to_next())
    try:
        loop.fire_due()
    finally:
        loop.timers.close()

    assert popped == [0, FIRST_CHUNK]
    runs = Run.objects.filter(schedule__in=schedules, scheduled_at=instant)
    assert runs.count() == len(schedules) == len({run.schedule_id for run in runs})
