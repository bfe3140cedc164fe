"""Catch-up planning under a calendar (pure): each excluded instant is planned as skipped
exactly once over successive materializations, moved instants carry where from."""

from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

from runs.catch_up import plan_catch_up
from schedules import recurrence
from schedules.recurrence.calendars import CalendarDays

UTC = timezone.utc
HOLIDAY = CalendarDays("cal_h", ZoneInfo("UTC"), frozenset({date(2026, 11, 9)}))
MONDAYS = {"kind": "cron", "cron": "0 9 * * 1", "timezone": "UTC"}


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def rule(policy):
    return recurrence.parse_rule(MONDAYS).calendared(["cal_h"], policy).bound({"cal_h": HOLIDAY})


def test_skip__each_excluded_instant_is_planned_once_across_passes():
    r = rule("skip")
    first = plan_catch_up(r, utc(2026, 11, 2, 9), utc(2026, 11, 10, 12), policy="run_all", grace_seconds=60,
                          calendar_from=utc(2026, 11, 1))
    assert (first.run, first.calendar_skipped, first.next_run_at) == ([utc(2026, 11, 2, 9)], [], utc(2026, 11, 16, 9))
    assert first.walked_through == utc(2026, 11, 2, 9)
    second = plan_catch_up(r, first.next_run_at, utc(2026, 11, 17), policy="run_all", grace_seconds=60,
                           calendar_from=first.walked_through)
    assert second.run == [utc(2026, 11, 16, 9)] and second.calendar_skipped == [(utc(2026, 11, 9, 9), "cal_h")]
    third = plan_catch_up(r, second.next_run_at, utc(2026, 11, 24), policy="run_all", grace_seconds=60,
                          calendar_from=second.walked_through)
    assert third.run == [utc(2026, 11, 23, 9)] and third.calendar_skipped == []


def test_skip__a_long_outage_plans_run_and_skipped_in_one_pass():
    plan = plan_catch_up(rule("skip"), utc(2026, 11, 2, 9), utc(2026, 11, 24), policy="skip", grace_seconds=60,
                         calendar_from=utc(2026, 11, 1))
    assert plan.skipped == [utc(2026, 11, 2, 9), utc(2026, 11, 16, 9), utc(2026, 11, 23, 9)]  # misfire
    assert plan.calendar_skipped == [(utc(2026, 11, 9, 9), "cal_h")]


def test_shift_after__moved_run_carries_shifted_from_and_nothing_is_skipped():
    plan = plan_catch_up(rule("shift_after"), utc(2026, 11, 2, 9), utc(2026, 11, 17), policy="run_all",
                         grace_seconds=60, calendar_from=utc(2026, 11, 1))
    assert plan.run == [utc(2026, 11, 2, 9), utc(2026, 11, 10, 9), utc(2026, 11, 16, 9)]
    assert plan.shifted_from == {utc(2026, 11, 10, 9): utc(2026, 11, 9, 9)}
    assert plan.calendar_skipped == []
