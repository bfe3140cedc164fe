"""The console's rule in words for the v1.2 cron syntax and dialects: the day fields read
as the rule's dialect combines them, H as the values the schedule's id fixes."""

import pytest

from console.words import rule_in_words, rule_syntax
from schedules.recurrence import next_after, parse_rule


@pytest.mark.parametrize("cron, dialect, words", [
    ("0 0 */10 * 5", "vixie", "at 00:00 on days 1, 11, 21, 31 of the month when it is Fri"),
    ("0 0 */10 * 5", "or", "at 00:00 on days 1, 11, 21, 31 of the month or on Fri"),
    ("0 9 1,15 * mon", "vixie", "at 09:00 on days 1, 15 of the month or on Mon"),
    ("0 9 1-31 * mon", "vixie", "at 09:00 every day"),
    ("0 9 1-31 * mon", "and", "at 09:00 on Mon"),
    ("0 9 1-7 * 1", "and", "at 09:00 on days 1-7 of the month when it is Mon"),
    ("0 17 L * *", "vixie", "at 17:00 on the last day of the month"),
    ("0 17 L-2 * *", "vixie", "at 17:00 on 2 days before the last day of the month"),
    ("0 17 LW * *", "vixie", "at 17:00 on the last weekday of the month"),
    ("0 9 15W * *", "vixie", "at 09:00 on the weekday nearest day 15 of the month"),
    ("0 9 ? * 5L", "vixie", "at 09:00 on the last Fri of the month"),
    ("0 9 ? * 5#3", "vixie", "at 09:00 on the 3rd Fri of the month"),
    ("*/15 * * * * *", "vixie", "every 15 seconds"),
    ("30 0 9 * * 1-5", "vixie", "at 09:00:30 on Mon-Fri"),
    ("@monthly", "vixie", "at 00:00 on day 1 of the month"),
])
def test_new_syntax_and_dialects_in_words(cron, dialect, words):
    assert rule_in_words({"kind": "cron", "cron": cron, "timezone": "UTC", "dialect": dialect}) == f"{words} (UTC)"


def test_h_reads_as_the_values_the_schedule_id_fixes():
    recurrence = {"kind": "cron", "cron": "h h * * *", "timezone": "UTC", "dialect": "vixie", "hashKey": "sch_1"}
    at = next_after(parse_rule(recurrence), parse_rule({"kind": "once", "at": "2026-01-01T00:00:00Z"}).at)
    assert rule_in_words(recurrence) == f"at {at:%H:%M} every day (UTC)"


def test_syntax_names_a_dialect_other_than_the_default():
    assert rule_syntax({"kind": "cron", "cron": "0 9 1-7 * 1", "dialect": "and"}) == "cron 0 9 1-7 * 1 (dialect and)"
    assert rule_syntax({"kind": "cron", "cron": "0 9 * * 1", "dialect": "vixie"}) == "cron 0 9 * * 1"


def test_business_day_and_calendar_in_words():
    from console.words import rule_in_words

    names = {"cal_us": "US bank holidays"}
    business = {"kind": "business_day", "days": [-1], "at": "17:00", "timezone": "America/New_York",
                "calendarIds": ["cal_us"]}
    assert rule_in_words(business, None, names) == (
        "at 17:00 on the last business day of each month (America/New_York), except US bank holidays")
    assert rule_in_words({**business, "days": [1, 3, -2], "calendarIds": []}) == (
        "at 17:00 on the first, third and second-to-last business days of each month (America/New_York)")
    cron = {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "UTC"}
    assert rule_in_words(cron, {"calendarIds": ["cal_us", "cal_x"], "policy": "shift_before"}, names) == (
        "at 09:00 on Mon-Fri (UTC); moved to the business day before on US bank holidays, cal_x")
