"""Calendars on instants and the business_day kind: pure, no database. Expected instants are
written out by hand (a second derivation), never computed by the code under test."""

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

from schedules import recurrence
from schedules.recurrence.calendars import CalendarDays, CalendarSet

UTC = timezone.utc


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def local(zone, *parts):
    return datetime(*parts, tzinfo=ZoneInfo(zone)).astimezone(UTC)


def holidays(calendar_id="cal_h", zone="UTC", dates=(), annual=(), weekdays=()):
    return CalendarDays(calendar_id, ZoneInfo(zone), frozenset(dates), frozenset(annual), frozenset(weekdays))


def rule(data, calendars=(), policy="skip"):
    parsed = recurrence.parse_rule(data, default_anchor=utc(2027, 1, 1))
    ids = [c.calendar_id for c in calendars]
    by_id = {c.calendar_id: c for c in calendars}
    if parsed.kind == "business_day":
        return parsed.bound(by_id)
    return parsed.calendared(ids, policy).bound(by_id)


DAILY_9 = {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}
WEEKDAYS_9 = {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "UTC"}


def test_skip__excluded_dates_are_no_occurrence():
    # 2027-07-05 is a Monday.
    r = rule(DAILY_9, [holidays(dates=[date(2027, 7, 5)])])
    assert recurrence.preview(r, utc(2027, 7, 4, 10), 2) == [utc(2027, 7, 6, 9), utc(2027, 7, 7, 9)]
    assert recurrence.calendar_excluded(r, utc(2027, 7, 4, 10), utc(2027, 7, 6, 9), limit=10) == [
        (utc(2027, 7, 5, 9), "cal_h")]


def test_skip__annual_and_weekdays():
    r = rule(DAILY_9, [holidays(annual=[(12, 25)], weekdays=[6, 7])])
    # 2027-12-24 is a Friday; 25, 26 weekend (and 25 annual); Monday 27.
    assert recurrence.preview(r, utc(2027, 12, 24, 10), 1) == [utc(2027, 12, 27, 9)]


def test_skip__minutely_rule_over_a_long_holiday_is_bounded_and_found():
    r = rule({"kind": "cron", "cron": "* * * * *", "timezone": "UTC"},
             [holidays(dates=[date(2027, 8, d) for d in range(1, 32)])])
    assert recurrence.next_after(r, utc(2027, 7, 31, 23, 59)) == utc(2027, 9, 1)


def test_shift_after__friday_holiday_moves_to_monday():
    # 2027-07-02 is a Friday; weekdays rule, shift after -> Monday 07-05 09:00, which is also a
    # rule instant of its own: one occurrence.
    r = rule(WEEKDAYS_9, [holidays(dates=[date(2027, 7, 2)])], "shift_after")
    assert recurrence.preview(r, utc(2027, 7, 1, 10), 2) == [utc(2027, 7, 5, 9), utc(2027, 7, 6, 9)]
    assert recurrence.calendar_shifted_from(r, utc(2027, 7, 5, 9)) is None


def test_shift_before__monday_holiday_moves_to_friday_and_carries_shifted_from():
    # Mondays at 09:00; 2027-07-05 (Monday) excluded -> Friday 07-02.
    r = rule({"kind": "cron", "cron": "0 9 * * 1", "timezone": "UTC"}, [holidays(dates=[date(2027, 7, 5)])],
             "shift_before")
    assert recurrence.preview(r, utc(2027, 6, 28, 10), 2) == [utc(2027, 7, 2, 9), utc(2027, 7, 12, 9)]
    assert recurrence.calendar_shifted_from(r, utc(2027, 7, 2, 9)) == utc(2027, 7, 5, 9)
    assert recurrence.calendar_excluded(r, utc(2027, 6, 28, 10), utc(2027, 7, 12), limit=5) == []
    entries = recurrence.preview_entries(r, utc(2027, 6, 28, 10), 3, include_excluded=True)
    assert entries == [(utc(2027, 7, 2, 9), utc(2027, 7, 5, 9), None), (utc(2027, 7, 5, 9), None, "cal_h"),
                       (utc(2027, 7, 12, 9), None, None)]


def test_shift_after__across_month_and_year_end():
    # The 31st of each month at 17:00; 2027-12-31 (Friday) excluded -> Monday 2028-01-03.
    r = rule({"kind": "cron", "cron": "0 17 31 * *", "timezone": "UTC"}, [holidays(dates=[date(2027, 12, 31)])],
             "shift_after")
    assert recurrence.next_after(r, utc(2027, 12, 1)) == utc(2028, 1, 3, 17)
    assert recurrence.calendar_shifted_from(r, utc(2028, 1, 3, 17)) == utc(2027, 12, 31, 17)
    # Asked from inside the holiday, the moved instant is still found.
    assert recurrence.next_after(r, utc(2028, 1, 1, 12)) == utc(2028, 1, 3, 17)


def test_shift_before__across_month_start():
    # The 1st at 09:00; 2027-08-01 is a Sunday (weekend not business) and excluded -> Friday 07-30.
    r = rule({"kind": "cron", "cron": "0 9 1 * *", "timezone": "UTC"}, [holidays(dates=[date(2027, 8, 1)])],
             "shift_before")
    assert recurrence.next_after(r, utc(2027, 7, 2)) == utc(2027, 7, 30, 9)


def test_shift__keeps_local_time_across_dst():
    # New York, daily 09:00; Sunday 2027-03-14 is the spring-forward day. Saturday 03-13
    # excluded, shift_after -> Monday 03-15 09:00 EDT (13:00 UTC), not 14:00 UTC.
    zone = "America/New_York"
    r = rule({"kind": "cron", "cron": "0 9 * * 6", "timezone": zone},
             [holidays(zone=zone, dates=[date(2027, 3, 13)])], "shift_after")
    assert recurrence.next_after(r, local(zone, 2027, 3, 12)) == local(zone, 2027, 3, 15, 9)
    assert local(zone, 2027, 3, 15, 9) == utc(2027, 3, 15, 13)


def test_calendar_zone_decides_the_excluded_date():
    # 23:30 in Tokyo is 14:30 UTC the same day; a calendar in UTC excluding that UTC date.
    r = rule({"kind": "cron", "cron": "30 23 * * *", "timezone": "Asia/Tokyo"},
             [holidays(zone="UTC", dates=[date(2027, 7, 5)])])
    assert recurrence.next_after(r, local("Asia/Tokyo", 2027, 7, 5, 0)) == local("Asia/Tokyo", 2027, 7, 6, 23, 30)


def test_no_business_day_within_reach__skipped():
    r = rule(WEEKDAYS_9, [holidays(weekdays=[1, 2, 3, 4, 5])], "shift_after")
    assert recurrence.next_after(r, utc(2027, 7, 1)) is None


def test_dates_at_year_9999_never_raise():
    r = rule(DAILY_9, [holidays(dates=[date(9999, 12, 29), date(9999, 12, 30), date(9999, 12, 31)])],
             "shift_after")
    assert recurrence.next_after(r, utc(9999, 12, 28, 10)) is None


# --- business_day --------------------------------------------------------------------------


def test_business_day__first_and_last_of_month():
    r = rule({"kind": "business_day", "days": [1, -1], "at": "17:00", "timezone": "UTC"})
    # July 2027: Thursday 1st is first; Friday 30th is last (31st Saturday).
    assert recurrence.preview(r, utc(2027, 6, 30, 18), 3) == [utc(2027, 7, 1, 17), utc(2027, 7, 30, 17),
                                                             utc(2027, 8, 2, 17)]


def test_business_day__calendars_exclude_days():
    # US-style: 2027-07-05 observed holiday; the 3rd business day of July is then Wed 7th... counted:
    # Thu 1, Fri 2, (Mon 5 excluded), Tue 6 -> third is Tue 6.
    cal = holidays("cal_us", "America/New_York", dates=[date(2027, 7, 5)])
    r = rule({"kind": "business_day", "days": [3], "at": "09:00", "timezone": "America/New_York",
              "calendarIds": ["cal_us"]}, [cal])
    assert recurrence.next_after(r, utc(2027, 7, 1)) == local("America/New_York", 2027, 7, 6, 9)


def test_business_day__more_days_than_the_month_has_is_no_instant():
    r = rule({"kind": "business_day", "days": [23], "at": "09:00", "timezone": "UTC"})
    # February 2027 has 20 business days: skipped; March 2027 has 23 (31st is Wednesday).
    assert recurrence.next_after(r, utc(2027, 2, 1)) == utc(2027, 3, 31, 9)


def test_business_day__dst_gap_time_resolves_forward():
    zone = "Europe/London"
    # 2027-03-28 is a Sunday; pick a time in the gap on a weekday is impossible in London (Sunday
    # changes), so check the round trip of the ordinary case instead.
    r = rule({"kind": "business_day", "days": [-1], "at": "17:00", "timezone": zone})
    assert recurrence.next_after(r, utc(2027, 3, 1)) == local(zone, 2027, 3, 31, 17)
    assert recurrence.parse_rule(r.to_dict()).to_dict() == r.to_dict()


@pytest.mark.parametrize("days", [[0], [24], [-24], [True], "1", [], [1.5]])
def test_business_day__bad_days_are_refused(days):
    with pytest.raises(recurrence.RecurrenceError) as caught:
        recurrence.parse_rule({"kind": "business_day", "days": days, "at": "09:00"})
    assert caught.value.field == "recurrence.days"


@pytest.mark.parametrize("at", ["24:00", "9:00", "09:60", 900, None])
def test_business_day__bad_time_is_refused(at):
    with pytest.raises(recurrence.RecurrenceError) as caught:
        recurrence.parse_rule({"kind": "business_day", "days": [1], "at": at})
    assert caught.value.field == "recurrence.at"


def test_calendar_set_business_is_monday_to_friday():
    cal = CalendarSet((holidays(dates=[date(2027, 7, 5)]),))
    assert not cal.business(utc(2027, 7, 5, 9), ZoneInfo("UTC"))
    assert cal.business(utc(2027, 7, 6, 9), ZoneInfo("UTC"))
    assert not cal.business(utc(2027, 7, 3, 9), ZoneInfo("UTC"))


ZONES = ["UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/Chicago", "America/Los_Angeles",
         "America/Sao_Paulo", "America/Santiago", "America/Havana", "America/St_Johns", "Asia/Beirut",
         "Asia/Tehran", "Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney", "Australia/Lord_Howe",
         "Antarctica/Troll", "Pacific/Apia", "Pacific/Auckland", "Pacific/Chatham", "Africa/Cairo"]


def _expected_shift(r, zone, cal, step):
    """Where an excluded instant moves, derived here: the same wall time on the nearest
    Monday-Friday (rule zone) whose date no calendar excludes (calendar zone)."""
    tz = ZoneInfo(zone)
    local_time = r.astimezone(tz).replace(tzinfo=None)
    for k in range(1, 367):
        slot = local_time + step * k * (datetime(2000, 1, 2) - datetime(2000, 1, 1))
        candidate = slot.replace(tzinfo=tz).astimezone(UTC)
        if candidate.astimezone(tz).isoweekday() <= 5 and not any(c.excludes(candidate) for c in cal):
            return candidate
    return None


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("policy", ["skip", "shift_before", "shift_after"])
def test_calendar_policies_across_dst__each_occurrence_is_kept_or_moved_once(zone, policy):
    # Daily at 00:30 and 02:30 (midnight and early-morning DST changes), every third local
    # day of 2027 excluded, in the rule's own zone; weekends are not business days.
    dates = [date(2027, 1, 1) + (date(2027, 1, 4) - date(2027, 1, 1)) * k for k in range(122)]
    cal = (holidays(zone=zone, dates=dates),)
    data = {"kind": "cron", "cron": "30 0,2 * * *", "timezone": zone}
    plain = recurrence.parse_rule(data)
    r = rule(data, cal, policy)
    raw = recurrence.preview(plain, utc(2027, 1, 1), 730)
    excluded = [at for at in raw if cal[0].excludes(at)]
    expected = {at for at in raw if not cal[0].excludes(at)}
    if policy != "skip":
        step = -1 if policy == "shift_before" else 1
        expected |= {moved for moved in (_expected_shift(at, zone, cal, step) for at in excluded) if moved}
    lo, hi = raw[10], raw[-10]
    expected = sorted(at for at in expected if lo < at < hi)
    got = [at for at in recurrence.preview(r, lo, len(expected) + 5) if at < hi]
    assert got == expected
    assert not set(got) & set(excluded)

RULES = [{"kind": "cron", "cron": "0 9 * * *"}, {"kind": "cron", "cron": "30 2 * * 1-5"},
         {"kind": "cron", "cron": "*/20 * * * *"}, {"kind": "cron", "cron": "0 17 L * *"},
         {"kind": "interval", "everySeconds": 3600, "anchor": "2027-01-01T00:00:00Z"},
         {"kind": "rrule", "rrule": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", "dtstart": "2027-01-01T00:00:00"},
         {"kind": "business_day", "days": [1, -1, 23], "at": "02:30"}]


@hypothesis_settings(max_examples=150, deadline=None)
@given(rule_index=st.integers(0, len(RULES) - 1), zone=st.sampled_from(ZONES),
       policy=st.sampled_from(["skip", "shift_before", "shift_after"]),
       weekdays=st.sets(st.integers(1, 7), max_size=7), span=st.integers(0, 40),
       after=st.datetimes(min_value=datetime(1, 1, 3), max_value=datetime(9999, 12, 29)))
def test_calendar_rules__any_instant_any_zone__an_answer_after_it_or_none_never_an_error(
        rule_index, zone, policy, weekdays, span, after):
    after = after.replace(tzinfo=UTC)
    day = after.date()
    dates = []
    for k in range(span):
        try:
            dates.append(day + timedelta(days=k))
        except OverflowError:
            break
    cal = holidays(zone=zone, dates=dates, weekdays=weekdays)
    data = {**RULES[rule_index], "timezone": zone}
    if data["kind"] == "business_day":
        data["calendarIds"] = [cal.calendar_id]
    r = rule(data, [cal], policy)
    found = recurrence.next_after(r, after)
    assert found is None or found > after
    entries = recurrence.preview_entries(r, after, 3, include_excluded=True)
    assert [at for at, _, _ in entries] == sorted(at for at, _, _ in entries)
