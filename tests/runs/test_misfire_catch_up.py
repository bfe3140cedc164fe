"""A two-day scanner outage: catch-up follows the schedule's misfire policy, is bounded,
and accounts for every missed instant in history (nothing silently dropped)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from runs import authority
from runs.catch_up import RUN_ALL_PER_CYCLE, SKIPPED_RECORDS_CAP
from kernel.clock import authority_now
from runs.models import Run, RunState, SkipReason
from schedules import recurrence
from schedules.models import Schedule
from tests.authority_steps import create_schedule
from tests.factories import api_client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


def outage(schedule, *, days: float = 2):
    """The scanner was down: the schedule's next instant is ``days`` old. Returns its rule."""
    rule = recurrence.parse_rule(schedule.recurrence)
    first = recurrence.next_after(rule, authority_now() - timedelta(days=days))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=first)
    return rule, first


def instants_until_next(schedule, rule, first):
    """Every instant from ``first`` up to (excluding) the schedule's new next_run_at."""
    schedule.refresh_from_db()
    assert schedule.next_run_at > authority_now()
    instants, cursor = [first], first
    while (cursor := recurrence.next_after(rule, cursor)) < schedule.next_run_at:
        instants.append(cursor)
    return instants


def accounted(runs) -> int:
    return sum(run.skipped_count or 1 for run in runs)


def test_two_day_outage__latest_only__one_queued_rest_skipped_as_misfire(tenant):
    schedule = create_schedule(tenant, cron="*/30 * * * *")
    rule, first = outage(schedule)

    stats = authority.materialize_due()

    instants = instants_until_next(schedule, rule, first)
    assert len(instants) in (96, 97)
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    queued = [r for r in runs if r.state == RunState.QUEUED]
    skipped = [r for r in runs if r.state == RunState.SKIPPED]
    assert [r.scheduled_at for r in queued] == [instants[-1]]
    assert len(skipped) == len(instants) - 1 == len(runs) - 1
    assert {(r.skip_reason, r.skipped_count) for r in skipped} == {(SkipReason.MISFIRE, None)}
    assert [r.scheduled_at for r in runs] == instants
    assert accounted(runs) == len(instants)
    assert (stats.queued, stats.skipped) == (1, len(instants) - 1)
    # Caught up: the next scan has nothing to do.
    assert authority.materialize_due().schedules == 0


def test_two_day_outage__every_minute__skipped_records_capped_and_range_accounts_for_rest(tenant):
    schedule = create_schedule(tenant, cron="* * * * *")
    rule, first = outage(schedule)

    authority.materialize_due()

    instants = instants_until_next(schedule, rule, first)
    assert len(instants) >= 2880
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    ranges = [r for r in runs if r.skipped_count is not None]
    singles = [r for r in runs if r.state == RunState.SKIPPED and r.skipped_count is None]
    queued = [r for r in runs if r.state == RunState.QUEUED]
    assert len(runs) == SKIPPED_RECORDS_CAP + 2
    assert len(singles) == SKIPPED_RECORDS_CAP
    assert [r.scheduled_at for r in queued] == [instants[-1]]
    assert len(ranges) == 1
    span = ranges[0]
    assert span.state == RunState.SKIPPED and span.skip_reason == SkipReason.MISFIRE
    # The range stands for the oldest instants, the individual records for the newest ones.
    assert span.scheduled_at == instants[0]
    assert span.skipped_through == instants[span.skipped_count - 1]
    assert [r.scheduled_at for r in singles] == instants[span.skipped_count:-1]
    assert accounted(runs) == len(instants)


def test_two_day_outage__skip__every_missed_instant_skipped_resumes_at_next_future(tenant):
    # No grace: every instant before the scan is missed, so nothing runs.
    schedule = create_schedule(tenant, cron="*/30 * * * *", misfirePolicy="skip", misfireGraceSeconds=0)
    rule, first = outage(schedule)

    stats = authority.materialize_due()

    instants = instants_until_next(schedule, rule, first)
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    assert [r.scheduled_at for r in runs] == instants
    assert {(r.state, r.skip_reason) for r in runs} == {(RunState.SKIPPED, SkipReason.MISFIRE)}
    assert stats.queued == 0 and stats.skipped == len(instants)
    assert schedule.next_run_at == recurrence.next_after(rule, instants[-1])


def test_two_day_outage__run_all__at_most_100_per_cycle_until_every_instant_ran(tenant):
    schedule = create_schedule(tenant, cron="*/5 * * * *", misfirePolicy="run_all", overlapPolicy="allow")
    rule, first = outage(schedule)

    cycles = []
    while True:
        stats = authority.materialize_due()
        if stats.schedules == 0:
            break
        assert stats.queued <= RUN_ALL_PER_CYCLE and stats.skipped == 0
        cycles.append(stats.queued)
        assert len(cycles) < 20

    instants = instants_until_next(schedule, rule, first)
    assert len(instants) >= 576
    assert cycles[:5] == [RUN_ALL_PER_CYCLE] * 5
    assert sum(cycles) == len(instants) and len(cycles) == -(-len(instants) // RUN_ALL_PER_CYCLE)
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    assert [r.scheduled_at for r in runs] == instants
    assert {r.state for r in runs} == {RunState.QUEUED}



def test_run_all__one_scan_cycle_releases_at_most_100_of_a_backlog(tenant):
    """A 1-second rule 1,000 s behind: `scan --once` releases 100 occurrences, the next
    cycle 100 more; the backlog stays due meanwhile, nothing is skipped."""
    schedule = create_schedule(tenant, misfirePolicy="run_all", overlapPolicy="allow")
    Schedule.objects.filter(id=schedule.id).update(
        recurrence={"kind": "interval", "everySeconds": 1, "anchor": "2026-01-01T00:00:00Z", "timezone": "UTC"}
    )
    behind = authority_now().replace(microsecond=0) - timedelta(seconds=1000)
    Schedule.objects.filter(id=schedule.id).update(next_run_at=behind)

    call_command("scan", "--once", stdout=StringIO())
    assert Run.objects.filter(schedule=schedule).count() == RUN_ALL_PER_CYCLE
    schedule.refresh_from_db()
    assert schedule.next_run_at == behind + timedelta(seconds=RUN_ALL_PER_CYCLE)
    call_command("scan", "--once", stdout=StringIO())
    runs = api_client(tenant).get(f"/api/v1/schedules/{schedule.id}/runs", {"limit": 200}).json()["results"]
    assert len(runs) == 2 * RUN_ALL_PER_CYCLE and {r["state"] for r in runs} == {"queued"}
