"""Example-based tests for schedules.recurrence (no database, no Django)."""

import time
from datetime import datetime, timedelta, timezone

import pytest

from schedules.recurrence import (
    MAX_SECONDS,
    InvalidCron,
    InvalidRecurrence,
    InvalidTimezone,
    RecurrenceError,
    Rule,
    instants_between,
    local_rendering,
    next_after,
    parse_rule,
    preview,
)

UTC = timezone.utc


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def iso(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cron(expression, zone="UTC"):
    return parse_rule({"kind": "cron", "cron": expression, "timezone": zone})


# --------------------------------------------------------------------------------------
# Cron: ordinary matching
# --------------------------------------------------------------------------------------


def test_worked_example_weekday_morning_in_new_york():
    rule = cron("0 9 * * 1-5", "America/New_York")
    assert next_after(rule, iso("2026-09-22T14:00:00Z")) == iso("2026-09-23T13:00:00Z")


def test_result_is_aware_utc_even_for_non_utc_input():
    rule = cron("0 9 * * 1-5", "America/New_York")
    after = iso("2026-09-22T10:00:00-04:00")
    result = next_after(rule, after)
    assert result.tzinfo is UTC
    assert result == iso("2026-09-23T13:00:00Z")


def test_next_after_is_strictly_after():
    rule = cron("0 9 * * *", "America/New_York")
    assert next_after(rule, iso("2026-09-23T13:00:00Z")) == iso("2026-09-24T13:00:00Z")
    assert next_after(rule, iso("2026-09-23T12:59:59.999999Z")) == iso("2026-09-23T13:00:00Z")


def test_naive_after_is_rejected():
    with pytest.raises(ValueError):
        next_after(cron("* * * * *"), datetime(2026, 1, 1))


def test_day_of_month_or_day_of_week_when_both_restricted():
    # 2026-09-01 is a Tuesday: the 1st, 15th and every Monday fire.
    rule = cron("0 12 1,15 * mon")
    days = [instant.day for instant in preview(rule, utc(2026, 8, 31, 13), 6)]
    assert days == [1, 7, 14, 15, 21, 28]


def test_day_of_week_alone_is_an_and_with_the_month():
    rule = cron("0 0 * 2 sun")
    results = preview(rule, utc(2026, 1, 1), 5)
    assert all(instant.month == 2 and instant.isoweekday() == 7 for instant in results)


def test_vixie_reads_a_field_by_its_first_character():
    # Vixie cron: 1-31 does not begin with '*', so it is a restriction and the two day
    # fields OR (every day); under `and` the weekday alone decides.
    assert preview(cron("0 0 1-31 * mon"), utc(2026, 9, 1), 3) == preview(cron("0 0 * * *"), utc(2026, 9, 1), 3)
    anded = parse_rule({"kind": "cron", "cron": "0 0 1-31 * mon", "dialect": "and"})
    assert preview(anded, utc(2026, 9, 1), 3) == preview(cron("0 0 * * mon"), utc(2026, 9, 1), 3)
    assert preview(cron("0 0 * * 0-7"), utc(2026, 9, 1), 3) == preview(cron("0 0 * * *"), utc(2026, 9, 1), 3)


def test_sunday_is_both_0_and_7():
    after = utc(2026, 9, 1)
    assert preview(cron("0 6 * * 0"), after, 4) == preview(cron("0 6 * * 7"), after, 4)
    assert preview(cron("0 6 * * sun"), after, 4) == preview(cron("0 6 * * 7"), after, 4)
    assert preview(cron("0 6 * * 5-7"), after, 6) == preview(cron("0 6 * * fri,sat,sun"), after, 6)


def test_names_are_case_insensitive_and_normalized():
    rule = cron("0 9 * JAN-Mar Mon-FRI")
    assert rule.cron == "0 9 * jan-mar mon-fri"
    assert preview(rule, utc(2026, 1, 1), 5) == preview(cron("0 9 * 1-3 1-5"), utc(2026, 1, 1), 5)


def test_whitespace_is_normalized():
    assert cron("  0\t9   * *  1-5 ").cron == "0 9 * * 1-5"


def test_steps_and_ranges():
    rule = cron("10-50/20 */6 * * *")
    results = preview(rule, utc(2026, 1, 1), 7)
    assert [(r.hour, r.minute) for r in results] == [
        (0, 10), (0, 30), (0, 50), (6, 10), (6, 30), (6, 50), (12, 10)
    ]


def test_leap_day_schedule_skips_to_the_next_leap_year():
    rule = cron("0 0 29 2 *")
    assert preview(rule, utc(2026, 1, 1), 2) == [utc(2028, 2, 29), utc(2032, 2, 29)]
    # 2100 is not a leap year: an eight-year gap, still found.
    assert next_after(rule, utc(2096, 3, 1)) == utc(2104, 2, 29)


def test_impossible_day_of_month_is_possible_when_weekday_also_given():
    # "31 Feb or any Monday" fires on Mondays in February.
    rule = cron("0 0 31 2 mon")
    assert next_after(rule, utc(2026, 1, 1)) == utc(2026, 2, 2)


@pytest.mark.parametrize(
    ("alias", "expansion"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_aliases(alias, expansion):
    rule = cron(alias.upper(), "Europe/London")
    assert rule.cron == alias
    after = utc(2026, 10, 24, 22)
    assert preview(rule, after, 30) == preview(cron(expansion, "Europe/London"), after, 30)


# --------------------------------------------------------------------------------------
# Cron: DST
# --------------------------------------------------------------------------------------


def test_new_york_spring_forward_gap_fires_shifted_by_the_gap():
    rule = cron("30 2 * * *", "America/New_York")
    assert preview(rule, iso("2027-03-13T12:00:00Z"), 2) == [
        iso("2027-03-14T07:30:00Z"),  # 02:30 does not exist; fires at 03:30 EDT
        iso("2027-03-15T06:30:00Z"),
    ]
    assert local_rendering(rule, iso("2027-03-14T07:30:00Z")) == "2027-03-14T03:30:00-04:00"


def test_gap_slot_and_real_slot_resolving_to_one_instant_fire_once():
    rule = cron("30 2,3 * * *", "America/New_York")
    assert preview(rule, iso("2027-03-14T00:00:00Z"), 3) == [
        iso("2027-03-14T07:30:00Z"),
        iso("2027-03-15T06:30:00Z"),
        iso("2027-03-15T07:30:00Z"),
    ]


def test_gap_resolution_is_not_monotone_in_local_time():
    # 02:00 and 02:30 lie in the gap (-> 07:00Z, 07:30Z); 03:00 and 03:30 are real
    # (-> 07:00Z, 07:30Z). Two distinct instants in total.
    rule = cron("0,30 2,3 * * *", "America/New_York")
    assert preview(rule, iso("2027-03-14T06:00:00Z"), 3) == [
        iso("2027-03-14T07:00:00Z"),
        iso("2027-03-14T07:30:00Z"),
        iso("2027-03-15T06:00:00Z"),
    ]
    assert next_after(rule, iso("2027-03-14T07:05:00Z")) == iso("2027-03-14T07:30:00Z")


def test_gap_slot_earlier_in_local_time_than_after_can_still_be_next():
    # After 03:10 EDT, the 02:45 slot (in the gap) resolves to 07:45Z, still ahead.
    rule = cron("45 2 * * *", "America/New_York")
    assert next_after(rule, iso("2027-03-14T07:10:00Z")) == iso("2027-03-14T07:45:00Z")
    assert next_after(rule, iso("2027-03-14T07:45:00Z")) == iso("2027-03-15T06:45:00Z")


def test_new_york_fall_back_repeated_time_fires_once_at_first_occurrence():
    rule = cron("30 1 * * *", "America/New_York")
    assert preview(rule, iso("2026-10-31T12:00:00Z"), 2) == [
        iso("2026-11-01T05:30:00Z"),  # 01:30 EDT; the 01:30 EST copy does not fire
        iso("2026-11-02T06:30:00Z"),
    ]
    assert next_after(rule, iso("2026-11-01T06:00:00Z")) == iso("2026-11-02T06:30:00Z")


def test_hourly_across_fall_back_fires_each_local_hour_once():
    rule = cron("@hourly", "America/New_York")
    results = preview(rule, iso("2026-11-01T03:30:00Z"), 4)
    assert results == [
        iso("2026-11-01T04:00:00Z"),  # 00:00 EDT
        iso("2026-11-01T05:00:00Z"),  # 01:00 EDT
        iso("2026-11-01T07:00:00Z"),  # 02:00 EST; 01:00 EST (06:00Z) does not fire
        iso("2026-11-01T08:00:00Z"),
    ]
    assert [local_rendering(rule, r)[11:] for r in results] == [
        "00:00:00-04:00", "01:00:00-04:00", "02:00:00-05:00", "03:00:00-05:00"
    ]


def test_hourly_across_spring_forward_skips_nothing_that_exists():
    rule = cron("@hourly", "America/New_York")
    assert preview(rule, iso("2027-03-14T05:30:00Z"), 3) == [
        iso("2027-03-14T06:00:00Z"),  # 01:00 EST
        iso("2027-03-14T07:00:00Z"),  # 02:00 (gap) and 03:00 EDT: one occurrence
        iso("2027-03-14T08:00:00Z"),  # 04:00 EDT
    ]


def test_every_15_minutes_through_the_repeated_hour():
    rule = cron("*/15 * * * *", "America/New_York")
    results = instants_between(rule, iso("2026-11-01T05:00:00Z"), iso("2026-11-01T07:30:00Z"), 100)
    # 01:15, 01:30, 01:45 EDT, then the EST repeat of 01:xx is skipped until 02:00 EST.
    assert results == [
        iso("2026-11-01T05:15:00Z"),
        iso("2026-11-01T05:30:00Z"),
        iso("2026-11-01T05:45:00Z"),
        iso("2026-11-01T07:00:00Z"),
        iso("2026-11-01T07:15:00Z"),
        iso("2026-11-01T07:30:00Z"),
    ]


def test_london_spring_forward_and_fall_back():
    rule = cron("30 1 * * *", "Europe/London")
    assert preview(rule, iso("2027-03-27T12:00:00Z"), 2) == [
        iso("2027-03-28T01:30:00Z"),  # 01:30 does not exist; fires at 02:30 BST
        iso("2027-03-29T00:30:00Z"),
    ]
    assert preview(rule, iso("2026-10-24T12:00:00Z"), 2) == [
        iso("2026-10-25T00:30:00Z"),  # 01:30 BST, first of two
        iso("2026-10-26T01:30:00Z"),
    ]


def test_london_gap_and_next_hour_collapse_to_one_occurrence():
    rule = cron("0 1,2 * * *", "Europe/London")
    assert preview(rule, iso("2027-03-27T12:00:00Z"), 3) == [
        iso("2027-03-28T01:00:00Z"),
        iso("2027-03-29T00:00:00Z"),
        iso("2027-03-29T01:00:00Z"),
    ]


def test_lord_howe_thirty_minute_shifts():
    spring = cron("15 2 * * *", "Australia/Lord_Howe")
    # 02:00 -> 02:30 on 2026-10-04: 02:15 is in the 30-minute gap, fires at 02:45 +11:00.
    assert preview(spring, iso("2026-10-03T00:00:00Z"), 2) == [
        iso("2026-10-03T15:45:00Z"),
        iso("2026-10-04T15:15:00Z"),
    ]
    assert local_rendering(spring, iso("2026-10-03T15:45:00Z")) == "2026-10-04T02:45:00+11:00"

    fall = cron("45 1 * * *", "Australia/Lord_Howe")
    # 02:00 -> 01:30 on 2026-04-05: 01:45 happens twice, fires at the +11:00 one.
    assert preview(fall, iso("2026-04-04T00:00:00Z"), 2) == [
        iso("2026-04-04T14:45:00Z"),
        iso("2026-04-05T15:15:00Z"),
    ]


def test_santiago_midnight_gap():
    # Chile springs forward at 00:00 -> 01:00, so local midnight itself does not exist.
    rule = cron("@daily", "America/Santiago")
    assert preview(rule, iso("2026-09-05T00:00:00Z"), 3) == [
        iso("2026-09-05T04:00:00Z"),
        iso("2026-09-06T04:00:00Z"),  # fires at 01:00 -03:00
        iso("2026-09-07T03:00:00Z"),
    ]


def test_santiago_repeated_hour_before_midnight():
    rule = cron("30 23 * * *", "America/Santiago")
    assert preview(rule, iso("2026-04-04T12:00:00Z"), 2) == [
        iso("2026-04-05T02:30:00Z"),  # 23:30 -03:00, first of two
        iso("2026-04-06T03:30:00Z"),
    ]


def test_non_dst_zone():
    rule = cron("30 9 * * *", "Asia/Kolkata")
    assert next_after(rule, iso("2026-06-01T00:00:00Z")) == iso("2026-06-01T04:00:00Z")


# --------------------------------------------------------------------------------------
# Interval and after_completion
# --------------------------------------------------------------------------------------


def test_interval_before_at_and_after_anchor():
    rule = parse_rule({"kind": "interval", "everySeconds": 3600, "anchor": "2026-01-01T00:00:00Z"})
    assert rule.anchor == utc(2026, 1, 1)
    assert rule.timezone == "UTC"
    assert next_after(rule, utc(2025, 6, 1)) == utc(2026, 1, 1)
    assert next_after(rule, utc(2026, 1, 1)) == utc(2026, 1, 1, 1)
    assert next_after(rule, utc(2026, 1, 1, 0, 59, 59)) == utc(2026, 1, 1, 1)
    assert next_after(rule, utc(2026, 3, 5, 7, 0, 0, 1)) == utc(2026, 3, 5, 8)


def test_interval_ignores_dst():
    rule = parse_rule(
        {
            "kind": "interval",
            "everySeconds": 86400,
            "anchor": "2026-10-31T09:00:00-04:00",
            "timezone": "America/New_York",
        }
    )
    results = preview(rule, iso("2026-10-31T14:00:00Z"), 2)
    assert results == [iso("2026-11-01T13:00:00Z"), iso("2026-11-02T13:00:00Z")]
    assert local_rendering(rule, results[1]) == "2026-11-02T08:00:00-05:00"


def test_interval_anchor_offset_is_normalized_to_utc():
    rule = parse_rule({"kind": "interval", "everySeconds": 90, "anchor": "2026-01-01T05:30:00+05:30"})
    assert rule.anchor == utc(2026, 1, 1)
    assert rule.anchor.tzinfo is UTC
    assert rule.to_dict()["anchor"] == "2026-01-01T00:00:00Z"


def test_interval_default_anchor():
    created = iso("2026-05-05T10:00:00+02:00")
    rule = parse_rule({"kind": "interval", "everySeconds": 60}, default_anchor=created)
    assert rule.anchor == utc(2026, 5, 5, 8)
    with pytest.raises(InvalidRecurrence) as caught:
        parse_rule({"kind": "interval", "everySeconds": 60})
    assert caught.value.field == "recurrence.anchor"


def test_interval_instants_between():
    rule = parse_rule({"kind": "interval", "everySeconds": 600, "anchor": "2026-01-01T00:00:00Z"})
    assert instants_between(rule, utc(2026, 1, 1, 0, 5), utc(2026, 1, 1, 1), 100) == [
        utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 20), utc(2026, 1, 1, 0, 30),
        utc(2026, 1, 1, 0, 40), utc(2026, 1, 1, 0, 50), utc(2026, 1, 1, 1, 0),
    ]
    assert len(instants_between(rule, utc(2026, 1, 1), utc(2026, 2, 1), 7)) == 7


def test_after_completion():
    rule = parse_rule({"kind": "after_completion", "delaySeconds": 300})
    finished = iso("2026-01-01T10:00:00.5+01:00")
    assert next_after(rule, finished) == iso("2026-01-01T09:05:00.5Z")
    assert next_after(rule, finished).tzinfo is UTC
    assert instants_between(rule, utc(2026, 1, 1), utc(2027, 1, 1), 10) == []
    immediate = parse_rule({"kind": "after_completion", "delaySeconds": 0})
    assert next_after(immediate, finished) == finished


# --------------------------------------------------------------------------------------
# preview, instants_between, local_rendering, to_dict
# --------------------------------------------------------------------------------------


def test_preview_count():
    rule = cron("*/5 * * * *", "Pacific/Chatham")
    assert preview(rule, utc(2026, 1, 1), 0) == []
    results = preview(rule, utc(2026, 1, 1), 12)
    assert len(results) == 12
    assert results == [utc(2026, 1, 1, 0, 5) + timedelta(minutes=5 * i) for i in range(12)]


def test_instants_between_is_half_open_and_limited():
    rule = cron("0 * * * *")
    assert instants_between(rule, utc(2026, 1, 1, 0), utc(2026, 1, 1, 3), 10) == [
        utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)
    ]
    assert instants_between(rule, utc(2026, 1, 1, 0), utc(2026, 1, 1, 3), 2) == [
        utc(2026, 1, 1, 1), utc(2026, 1, 1, 2)
    ]
    assert instants_between(rule, utc(2026, 1, 1, 0), utc(2026, 1, 1, 0, 59), 10) == []


def test_local_rendering():
    rule = cron("0 9 * * 1-5", "America/New_York")
    assert local_rendering(rule, iso("2026-11-02T14:00:00Z")) == "2026-11-02T09:00:00-05:00"
    assert local_rendering(rule, iso("2026-09-23T13:00:00Z")) == "2026-09-23T09:00:00-04:00"
    assert local_rendering(cron("0 9 * * *", "Asia/Kolkata"), utc(2026, 1, 1)) == "2026-01-01T05:30:00+05:30"
    assert local_rendering(cron("0 9 * * *"), utc(2026, 1, 1)) == "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York", "dialect": "vixie"},
        {"kind": "cron", "cron": "@weekly", "timezone": "UTC", "dialect": "and"},
        {"kind": "cron", "cron": "h h * * *", "timezone": "UTC", "dialect": "or", "hashKey": "sch_1"},
        {"kind": "interval", "everySeconds": 45, "anchor": "2026-01-01T00:00:00Z", "timezone": "Europe/London"},
        {"kind": "interval", "everySeconds": 45, "anchor": "2026-01-01T00:00:00.250000Z", "timezone": "UTC"},
        {"kind": "after_completion", "delaySeconds": 0, "timezone": "UTC"},
    ],
)
def test_to_dict_round_trips(data):
    rule = parse_rule(data)
    assert rule.to_dict() == data
    assert parse_rule(rule.to_dict()) == rule


def test_defaults_fill_in_to_dict():
    assert parse_rule({"kind": "cron", "cron": "0 0 * * *"}).to_dict() == {
        "kind": "cron", "cron": "0 0 * * *", "timezone": "UTC", "dialect": "vixie"
    }
    assert parse_rule({"kind": "after_completion", "delaySeconds": 5}).to_dict() == {
        "kind": "after_completion", "delaySeconds": 5, "timezone": "UTC"
    }


def test_rule_is_frozen():
    rule = cron("0 0 * * *")
    with pytest.raises(AttributeError):
        rule.cron = "1 1 * * *"
    assert isinstance(rule, Rule)


# --------------------------------------------------------------------------------------
# Invalid input
# --------------------------------------------------------------------------------------

INVALID_CRONS = [
    pytest.param("", id="empty"),
    pytest.param("   ", id="blank"),
    pytest.param("* * * *", id="four-fields"),
    pytest.param("0 0 12 * * ? 2026", id="seven-fields-quartz"),
    pytest.param("0 0 12 * * 2026", id="six-fields-year"),
    pytest.param("R * * * *", id="random"),
    pytest.param("0 0 0 12 * * ? 2026", id="seven-fields"),
    pytest.param("0 0 L-40 * *", id="L-minus-40"),
    pytest.param("0 0 * * 5#6", id="sixth-friday"),
    pytest.param("0 0 * * 5#0", id="zeroth-friday"),
    pytest.param("0 0 32W * *", id="W-32"),
    pytest.param("0 0 0W * *", id="W-0"),
    pytest.param("0 0 L * L", id="bare-L-in-dow"),
    pytest.param("0 0 * * 5W", id="W-in-dow"),
    pytest.param("0 0 * * LW", id="LW-in-dow"),
    pytest.param("0 0 5#2 * *", id="hash-in-dom"),
    pytest.param("H(5-2) * * * *", id="hash-reversed-range"),
    pytest.param("H(0-60) * * * *", id="hash-range-past-field"),
    pytest.param("H/0 * * * *", id="hash-step-zero"),
    pytest.param("H/61 * * * *", id="hash-step-too-large"),
    pytest.param("? * * * *", id="question-mark-in-minute"),
    pytest.param("60 * * * * *", id="second-60"),
    pytest.param("5/15 * * * *", id="step-without-range"),
    pytest.param("60 * * * *", id="minute-60"),
    pytest.param("* 24 * * *", id="hour-24"),
    pytest.param("* * 0 * *", id="dom-0"),
    pytest.param("* * 32 * *", id="dom-32"),
    pytest.param("* * * 0 *", id="month-0"),
    pytest.param("* * * 13 *", id="month-13"),
    pytest.param("* * * * 8", id="dow-8"),
    pytest.param("-1 * * * *", id="negative"),
    pytest.param("100 * * * *", id="three-digits"),
    pytest.param("99999999999999999999 * * * *", id="huge-number"),
    pytest.param("30-10 * * * *", id="reversed-range"),
    pytest.param("* * * * fri-mon", id="reversed-name-range"),
    pytest.param("*/0 * * * *", id="step-zero"),
    pytest.param("*/61 * * * *", id="step-too-large"),
    pytest.param("1,,2 * * * *", id="empty-list-item"),
    pytest.param("1, * * * *", id="trailing-comma"),
    pytest.param("*-5 * * * *", id="star-range"),
    pytest.param("1-2-3 * * * *", id="double-range"),
    pytest.param("*/ * * * *", id="empty-step"),
    pytest.param("/5 * * * *", id="bare-step"),
    pytest.param("* * * * monday", id="long-day-name"),
    pytest.param("* * * * foo", id="unknown-name"),
    pytest.param("* * * mon *", id="weekday-name-in-month"),
    pytest.param("* * jan * *", id="month-name-in-dom"),
    pytest.param("* jan * * *", id="name-in-hour"),
    pytest.param("@reboot", id="alias-reboot"),
    pytest.param("@every 5m", id="alias-every"),
    pytest.param("@daily extra", id="alias-with-extra"),
    pytest.param("@", id="bare-at"),
    pytest.param("0 0 31 2 *", id="feb-31"),
    pytest.param("0 0 30 2 *", id="feb-30"),
    pytest.param("0 0 31 4,6,9,11 *", id="31st-of-30-day-months"),
    pytest.param("0 0 30,31 feb *", id="feb-30-31-names"),
    pytest.param("0 0 * * *\n0 1 * * *", id="newline"),
    pytest.param("0 0 * * *\x00", id="nul"),
    pytest.param("0\x0b0 * * *", id="vertical-tab"),
    pytest.param("0 0 * * \x7f", id="del"),
    pytest.param("0 0 * * mon\u00a0", id="nbsp"),
    pytest.param("٠ 0 * * *", id="arabic-indic-digit"),
    pytest.param("０ 0 * * *", id="fullwidth-digit"),
    pytest.param("0 0 * * *" + " " * 200, id="over-200-chars"),
    pytest.param("*," * 150 + "* * * * *", id="very-long"),
    pytest.param("x" * 100_000, id="huge"),
]


@pytest.mark.parametrize("expression", INVALID_CRONS)
def test_invalid_cron(expression):
    with pytest.raises(InvalidCron) as caught:
        cron(expression)
    assert caught.value.field == "recurrence.cron"
    assert caught.value.code == "invalid_cron"
    assert isinstance(caught.value, RecurrenceError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "expression",
    ["0 0 29 2 *", "59 23 31 12 *", "0 0 * * 7", "0-59/59 0-23/23 1-31/30 1-12/11 0-7/7",
     "0 0 31 * *", "0,30 */2 1-7,15 jan,jul mon-fri", "05 09 01 01 *"],
)
def test_valid_edge_crons(expression):
    assert next_after(cron(expression), utc(2026, 1, 1)) is not None


INVALID_ZONES = [
    "Mars/Olympus_Mons",
    "america/new_york",
    "EST5EDT ",
    "",
    " ",
    "../etc/passwd",
    "America/../America/New_York",
    "/usr/share/zoneinfo/UTC",
    "/etc/localtime",
    "localtime",
    "Europe/Londön",
    "UTC\x00",
    "UTC\n",
    "Europe/London/",
    "x" * 10_000,
    "+05:00",
]


@pytest.mark.parametrize("zone", INVALID_ZONES)
def test_invalid_timezone(zone):
    with pytest.raises(InvalidTimezone) as caught:
        parse_rule({"kind": "cron", "cron": "0 0 * * *", "timezone": zone})
    assert caught.value.field == "recurrence.timezone"
    assert caught.value.code == "invalid_timezone"
    with pytest.raises(InvalidTimezone):
        parse_rule({"kind": "after_completion", "delaySeconds": 1, "timezone": zone})


@pytest.mark.parametrize("zone", ["UTC", "Etc/UTC", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Kathmandu"])
def test_valid_timezones(zone):
    assert cron("0 0 * * *", zone).timezone == zone


INVALID_SHAPES = [
    pytest.param(None, "recurrence", id="not-an-object"),
    pytest.param(["cron"], "recurrence", id="list"),
    pytest.param({}, "recurrence.kind", id="missing-kind"),
    pytest.param({"kind": "weekly"}, "recurrence.kind", id="unknown-kind"),
    pytest.param({"kind": 1}, "recurrence.kind", id="kind-not-string"),
    pytest.param({"kind": "cron"}, "recurrence.cron", id="missing-cron"),
    pytest.param({"kind": "cron", "cron": 5}, "recurrence.cron", id="cron-not-string"),
    pytest.param({"kind": "cron", "cron": None}, "recurrence.cron", id="cron-null"),
    pytest.param({"kind": "cron", "cron": "* * * * *", "timezone": 5}, "recurrence.timezone", id="zone-not-string"),
    pytest.param({"kind": "cron", "cron": "* * * * *", "timezone": None}, "recurrence.timezone", id="zone-null"),
    pytest.param({"kind": "cron", "cron": "* * * * *", "tz": "UTC"}, "recurrence.tz", id="unknown-key"),
    pytest.param({"kind": "cron", "cron": "* * * * *", "everySeconds": 5}, "recurrence.everySeconds", id="key-of-other-kind"),
    pytest.param({"kind": "cron", "cron": "* * * * *", 1: "x"}, "recurrence", id="non-string-key"),
    pytest.param({"kind": "interval", "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="missing-every"),
    pytest.param({"kind": "interval", "everySeconds": True, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-bool"),
    pytest.param({"kind": "interval", "everySeconds": 60.0, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-float"),
    pytest.param({"kind": "interval", "everySeconds": "60", "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-string"),
    pytest.param({"kind": "interval", "everySeconds": 0, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-zero"),
    pytest.param({"kind": "interval", "everySeconds": -5, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-negative"),
    pytest.param({"kind": "interval", "everySeconds": MAX_SECONDS + 1, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-too-large"),
    pytest.param({"kind": "interval", "everySeconds": 10**100, "anchor": "2026-01-01T00:00:00Z"}, "recurrence.everySeconds", id="every-huge"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "2026-01-01T00:00:00"}, "recurrence.anchor", id="anchor-naive"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "2026-01-01"}, "recurrence.anchor", id="anchor-date-only"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "yesterday"}, "recurrence.anchor", id="anchor-garbage"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": 1767225600}, "recurrence.anchor", id="anchor-number"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "2026-01-01T00:00:00Z" * 10}, "recurrence.anchor", id="anchor-long"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "２026-01-01T00:00:00Z"}, "recurrence.anchor", id="anchor-non-ascii"),
    pytest.param({"kind": "interval", "everySeconds": 60, "anchor": "0001-01-01T00:00:00+01:00"}, "recurrence.anchor", id="anchor-out-of-range"),
    pytest.param({"kind": "after_completion"}, "recurrence.delaySeconds", id="missing-delay"),
    pytest.param({"kind": "after_completion", "delaySeconds": -1}, "recurrence.delaySeconds", id="delay-negative"),
    pytest.param({"kind": "after_completion", "delaySeconds": False}, "recurrence.delaySeconds", id="delay-bool"),
    pytest.param({"kind": "after_completion", "delaySeconds": "5"}, "recurrence.delaySeconds", id="delay-string"),
    pytest.param({"kind": "after_completion", "delaySeconds": 5, "cron": "* * * * *"}, "recurrence.cron", id="delay-with-cron"),
]


@pytest.mark.parametrize(("data", "field"), INVALID_SHAPES)
def test_invalid_shape(data, field):
    with pytest.raises(InvalidRecurrence) as caught:
        parse_rule(data)
    assert caught.value.field == field
    assert caught.value.code == "invalid_request"


# --------------------------------------------------------------------------------------
# Speed: the materializer calls next_after once per schedule per pass
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "zone"),
    [
        ("0 9 * * 1-5", "America/New_York"),
        ("*/15 * * * *", "Europe/London"),
        ("0 0 1 1 *", "Pacific/Chatham"),
        ("0 0 29 2 *", "UTC"),
        ("5 4 13 * fri", "Australia/Lord_Howe"),
    ],
)
def test_next_after_does_not_walk_minutes(expression, zone):
    rule = cron(expression, zone)
    starts = [utc(2026, 1, 1) + timedelta(hours=7 * i, minutes=13) for i in range(1000)]
    began = time.perf_counter()
    for start in starts:
        next_after(rule, start)
    per_call = (time.perf_counter() - began) / len(starts)
    # Typically ~5-15 microseconds; a generous bound that still catches minute-walking.
    assert per_call < 0.001


# --------------------------------------------------------------------------------------
# Once: a single instant (django-celery-beat's clocked and one-off rows import as this)
# --------------------------------------------------------------------------------------


def test_once__fires_at_its_instant_and_never_again():
    rule = parse_rule({"kind": "once", "at": "2030-06-01T14:00:00+02:00", "timezone": "Europe/Berlin"})
    assert rule.to_dict() == {"kind": "once", "at": "2030-06-01T12:00:00Z", "timezone": "Europe/Berlin"}
    assert next_after(rule, utc(2030, 1, 1)) == utc(2030, 6, 1, 12)
    assert next_after(rule, utc(2030, 6, 1, 12)) is None
    assert preview(rule, utc(2029, 1, 1), 5) == [utc(2030, 6, 1, 12)]
    assert instants_between(rule, utc(2030, 1, 1), utc(2031, 1, 1), 10) == [utc(2030, 6, 1, 12)]


@pytest.mark.parametrize("data, field", [
    ({"kind": "once"}, "recurrence.at"),
    ({"kind": "once", "at": "2030-06-01T12:00:00"}, "recurrence.at"),
    ({"kind": "once", "at": "soon"}, "recurrence.at"),
    ({"kind": "once", "at": "2030-06-01T12:00:00Z", "cron": "* * * * *"}, "recurrence.cron"),
])
def test_once__invalid_objects_name_their_field(data, field):
    with pytest.raises(InvalidRecurrence) as raised:
        parse_rule(data)
    assert raised.value.field == field
