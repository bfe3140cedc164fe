"""RRULE recurrences (schedules.recurrence.rrule): differential against python-dateutil on
zones without DST, the DST policy of cron on zones with it, COUNT/UNTIL/exdates/rdates, and
hostile rules answered 400 or in bounded time. No database."""

import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from dateutil import rrule as dateutil_rrule
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from schedules.recurrence import InvalidRRule, InvalidTimezone, next_after, parse_rule, preview
from schedules.recurrence.instants import LATEST
from schedules.recurrence.shadow_candidates import compare_window, dateutil_next

UTC = timezone.utc


def rrule(text, dtstart="2027-01-01T00:00:00", zone="UTC", **more):
    return parse_rule({"kind": "rrule", "rrule": text, "dtstart": dtstart, "timezone": zone, **more})


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def local_times(rule, after, count):
    zone = ZoneInfo(rule.timezone)
    return [instant.astimezone(zone).replace(tzinfo=None) for instant in preview(rule, after, count)]


# --------------------------------------------------------------------------------------
# Examples
# --------------------------------------------------------------------------------------


def test_contract_example_last_friday_at_17_london():
    rule = rrule("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0", zone="Europe/London",
                 exdates=["2027-12-31T17:00:00"])
    shown = [at.isoformat() for at in preview(rule, utc(2027, 1, 1), 13)]
    assert shown[:4] == ["2027-01-29T17:00:00+00:00", "2027-02-26T17:00:00+00:00",
                         "2027-03-26T17:00:00+00:00", "2027-04-30T16:00:00+00:00"]  # BST from March 28
    assert "2027-12-31T17:00:00+00:00" not in shown  # the exdate
    assert shown[10:] == ["2027-11-26T17:00:00+00:00", "2028-01-28T17:00:00+00:00", "2028-02-25T17:00:00+00:00"]


def test_to_dict_round_trips():
    data = {"kind": "rrule", "rrule": "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9", "dtstart": "2027-01-01T00:00:00",
            "timezone": "America/New_York", "exdates": ["2027-01-04T09:00:00"], "rdates": ["2027-01-02T10:30:00"]}
    rule = parse_rule(data)
    assert rule.to_dict() == data
    assert parse_rule(rule.to_dict()) == rule


def test_text_is_stored_upper_case_and_dates_sorted_once():
    rule = rrule(" freq=daily;byhour=9 ", exdates=["2027-01-03T09:00:00", "2027-01-02T09:00", "2027-01-03T09:00:00"])
    assert rule.to_dict()["rrule"] == "FREQ=DAILY;BYHOUR=9"
    assert rule.to_dict()["exdates"] == ["2027-01-02T09:00:00", "2027-01-03T09:00:00"]


def test_count_counts_rule_instants_from_dtstart_not_from_now():
    rule = rrule("FREQ=DAILY;COUNT=3;BYHOUR=9")
    assert preview(rule, utc(2026, 1, 1), 10) == [utc(2027, 1, 1, 9), utc(2027, 1, 2, 9), utc(2027, 1, 3, 9)]
    assert preview(rule, utc(2027, 1, 2, 12), 10) == [utc(2027, 1, 3, 9)]
    assert next_after(rule, utc(2027, 1, 3, 9)) is None


def test_count_is_not_extended_by_an_exdate():
    rule = rrule("FREQ=DAILY;COUNT=3", exdates=["2027-01-02T00:00:00"])
    assert preview(rule, utc(2026, 1, 1), 10) == [utc(2027, 1, 1), utc(2027, 1, 3)]


def test_until_local_and_until_utc():
    local = rrule("FREQ=DAILY;BYHOUR=9;UNTIL=20270103T090000", zone="America/New_York")
    assert local_times(local, utc(2026, 1, 1), 10)[-1] == datetime(2027, 1, 3, 9)
    in_utc = rrule("FREQ=DAILY;BYHOUR=9;UNTIL=20270103T140000Z", zone="America/New_York")  # 09:00 EST
    assert preview(in_utc, utc(2026, 1, 1), 10) == preview(local, utc(2026, 1, 1), 10)
    date_only = rrule("FREQ=DAILY;BYHOUR=9;UNTIL=20270103", zone="America/New_York")
    assert preview(date_only, utc(2026, 1, 1), 10) == preview(local, utc(2026, 1, 1), 10)


def test_rdates_add_and_exdates_remove_rdates_too():
    rule = rrule("FREQ=WEEKLY;BYDAY=FR;BYHOUR=12", rdates=["2027-01-05T08:00:00", "2027-01-06T08:00:00"],
                 exdates=["2027-01-06T08:00:00", "2027-01-08T12:00:00"])
    assert local_times(rule, utc(2027, 1, 1, 12), 3) == [
        datetime(2027, 1, 5, 8), datetime(2027, 1, 15, 12), datetime(2027, 1, 22, 12)]


def test_an_rdate_equal_to_an_instance_is_one_instant():
    rule = rrule("FREQ=DAILY;BYHOUR=9", rdates=["2027-01-02T09:00:00"])
    assert preview(rule, utc(2027, 1, 1, 10), 2) == [utc(2027, 1, 2, 9), utc(2027, 1, 3, 9)]


def test_rule_ended_answers_none_and_preview_is_empty():
    rule = rrule("FREQ=DAILY;UNTIL=20270105T000000")
    assert next_after(rule, utc(2030, 1, 1)) is None
    assert preview(rule, utc(2030, 1, 1), 5) == []


def test_interval_phase_kept_far_from_dtstart():
    rule = rrule("FREQ=WEEKLY;INTERVAL=3;BYDAY=TU;BYHOUR=8", dtstart="2001-01-01T00:00:00")
    oracle = dateutil_rrule.rrulestr("FREQ=WEEKLY;INTERVAL=3;BYDAY=TU;BYHOUR=8", dtstart=datetime(2001, 1, 1))
    expected = oracle.xafter(datetime(2040, 6, 1), count=5)
    assert local_times(rule, utc(2040, 6, 1), 5) == list(expected)


def test_secondly_from_year_one_is_fast():
    rule = rrule("FREQ=SECONDLY;INTERVAL=7", dtstart="0001-01-02T00:00:00")
    started = time.perf_counter()
    found = preview(rule, utc(2027, 1, 1), 3)
    assert time.perf_counter() - started < 0.5
    # The first multiple of 7 seconds from 0001-01-02 after 2027-01-01 (0 = a multiple itself).
    elapsed = int((datetime(2027, 1, 1) - datetime(1, 1, 2)).total_seconds())
    first = utc(2027, 1, 1) + timedelta(seconds=7 - elapsed % 7)
    assert found == [first, first + timedelta(seconds=7), first + timedelta(seconds=14)]


def test_bysetpos_in_a_week_counts_from_its_start():
    # The first weekday of each week (Monday, or the holiday-free next): BYSETPOS=1 on MO-FR.
    rule = rrule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=1;BYHOUR=9", exdates=[])
    assert local_times(rule, utc(2027, 3, 3), 2) == [datetime(2027, 3, 8, 9), datetime(2027, 3, 15, 9)]


def test_instants_near_year_9999_end_quietly():
    rule = rrule("FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=30", dtstart="9990-01-01T00:00:00", zone="Pacific/Kiritimati")
    instants = preview(rule, utc(9997, 1, 1), 5)
    assert instants and all(at <= LATEST for at in instants)


# --------------------------------------------------------------------------------------
# Differential: python-dateutil itself, on zones without DST
# --------------------------------------------------------------------------------------

FIXED_ZONES = ["UTC", "Etc/GMT-14", "Etc/GMT+12", "Asia/Kolkata", "Etc/GMT-5"]
FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rule_texts(draw):
    freq = draw(st.sampled_from(FREQS))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 5))}")
    if draw(st.booleans()):
        parts.append("BYMONTH=" + ",".join(map(str, draw(st.sets(st.integers(1, 12), min_size=1, max_size=4)))))
    if draw(st.booleans()):
        days = draw(st.sets(st.sampled_from(DAYS), min_size=1, max_size=3))
        nth = draw(st.sampled_from(["", "", "1", "-1", "2"])) if freq in ("MONTHLY", "YEARLY") else ""
        parts.append("BYDAY=" + ",".join(nth + day for day in sorted(days)))
    elif draw(st.booleans()):
        values = draw(st.sets(st.integers(-31, 31).filter(bool), min_size=1, max_size=3))
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(values))))
    if freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY") and draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(st.sets(st.integers(0, 23), min_size=1, max_size=3))))))
    if draw(st.booleans()):
        parts.append("BYMINUTE=" + ",".join(map(str, sorted(draw(st.sets(st.integers(0, 59), min_size=1, max_size=2))))))
    if freq in ("MONTHLY", "WEEKLY") and draw(st.booleans()):
        parts.append(f"BYSETPOS={draw(st.sampled_from([1, 2, -1, -2]))}")
    if freq == "WEEKLY" and draw(st.booleans()):
        parts.append(f"WKST={draw(st.sampled_from(DAYS))}")
    ending = draw(st.sampled_from(["", "", "COUNT", "UNTIL"]))
    if ending == "COUNT":
        parts.append(f"COUNT={draw(st.integers(1, 300))}")
    elif ending == "UNTIL":
        parts.append(f"UNTIL={draw(st.integers(2027, 2045))}0615T120000")
    return ";".join(parts)


moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 12, 31)).map(
    lambda moment: moment.replace(microsecond=0))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=rule_texts(), dtstart=moments, zone_name=st.sampled_from(FIXED_ZONES),
       skip_years=st.integers(-1, 30), exdate_picks=st.lists(st.integers(0, 20), max_size=3),
       rdates=st.lists(moments, max_size=3))
def test_next_instants_match_dateutil_on_fixed_offset_zones(text, dtstart, zone_name, skip_years, exdate_picks,
                                                            rdates):
    try:
        oracle_rule = dateutil_rrule.rrulestr(text, dtstart=dtstart)
    except ValueError:  # dateutil refuses it (an INTERVAL no BY value can meet): so do we
        with pytest.raises(InvalidRRule):
            rrule(text, dtstart=dtstart.isoformat())
        return
    head = list(oracle_rule.xafter(dtstart, count=21, inc=True))
    exdates = sorted({head[i] for i in exdate_picks if i < len(head)})
    try:
        rule = rrule(text, dtstart=dtstart.isoformat(), zone=zone_name,
                     exdates=[x.isoformat() for x in exdates], rdates=[x.isoformat() for x in rdates])
    except InvalidRRule:
        assume(False)  # no instant within its search bound, or too dense a period: refused, not walked
    oracle = dateutil_rrule.rruleset()
    oracle.rrule(oracle_rule)
    for x in exdates:
        oracle.exdate(x)
    for x in rdates:
        oracle.rdate(x)
    offset = ZoneInfo(zone_name).utcoffset(datetime(2020, 1, 1))
    # Far from dtstart (the rule is started again there), not so far the oracle walks long.
    unit = {"FREQ=MINUTELY": 1, "FREQ=HOURLY": 30}.get(text.split(";")[0], 365)
    reference = dtstart + timedelta(days=unit * skip_years + 17, seconds=skip_years * 3607)
    expected = list(oracle.xafter(reference, count=12))
    found = preview(rule, (reference - offset).replace(tzinfo=UTC), 12)
    assert [at + offset for at in (x.replace(tzinfo=None) for x in found)] == expected


# --------------------------------------------------------------------------------------
# DST: each local slot gives exactly one instant (cron's policy)
# --------------------------------------------------------------------------------------

def transitions(zone_name, year=2027):
    """Midnight (local) of the day before each UTC-offset change of the zone in ``year``."""
    zone, found = ZoneInfo(zone_name), []
    day = datetime(year, 1, 1, tzinfo=UTC)
    while day.year == year:
        if (day + timedelta(days=1)).astimezone(zone).utcoffset() != day.astimezone(zone).utcoffset():
            found.append((zone_name, day.astimezone(zone).replace(tzinfo=None, hour=0, minute=0).isoformat()))
        day += timedelta(days=1)
    return found


# 19 zones with offset changes in 2027 (Troll: 2 hours; Lord Howe: 30 minutes; Havana,
# Santiago and Beirut at or near midnight), and Apia's skipped day in 2011.
DST_ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "America/Havana", "America/Santiago",
             "Antarctica/Troll", "Asia/Beirut", "Europe/Berlin", "America/Los_Angeles", "America/Chicago",
             "Australia/Sydney", "Pacific/Auckland", "Pacific/Chatham", "Asia/Jerusalem",
             "Europe/Chisinau", "America/St_Johns", "Africa/Cairo", "America/Godthab", "Pacific/Easter"]
DST_CASES = [case for zone in DST_ZONES for case in transitions(zone)] + [("Pacific/Apia", "2011-12-28T00:00:00")]
SLOT_RULES = ["FREQ=MINUTELY;INTERVAL=15", "FREQ=HOURLY;BYMINUTE=30", "FREQ=DAILY;BYHOUR=0,1,2,3;BYMINUTE=0,30"]


def resolve(local, zone):
    return local.replace(tzinfo=zone).astimezone(UTC)


@pytest.mark.parametrize("zone_name,day", DST_CASES)
@pytest.mark.parametrize("text", SLOT_RULES)
def test_each_local_slot_gives_exactly_one_instant(zone_name, day, text):
    zone = ZoneInfo(zone_name)
    start = datetime.fromisoformat(day) - timedelta(days=1)
    end = start + timedelta(days=4)
    slots = list(dateutil_rrule.rrulestr(text, dtstart=start).between(start, end, inc=True))
    expected = sorted({resolve(slot, zone) for slot in slots})
    rule = rrule(text, dtstart=start.isoformat(), zone=zone_name)
    first = resolve(start, zone) - timedelta(microseconds=1)
    found = [at for at in preview(rule, first, len(expected) + 5) if at <= expected[-1]]
    assert found == expected  # strictly increasing, each resolution once, none lost


def test_gap_slot_shifts_forward_and_repeated_time_fires_once():
    gap = rrule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", zone="America/New_York")
    assert preview(gap, utc(2027, 3, 13, 12), 2) == [utc(2027, 3, 14, 7, 30), utc(2027, 3, 15, 6, 30)]
    fold = rrule("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", zone="America/New_York")
    assert preview(fold, utc(2027, 11, 6, 12), 2) == [utc(2027, 11, 7, 5, 30), utc(2027, 11, 8, 6, 30)]


def test_apia_skipped_day_gives_one_instant():
    rule = rrule("FREQ=DAILY;BYHOUR=10", dtstart="2011-12-27T00:00:00", zone="Pacific/Apia")
    # Dec 30 2011 did not exist there: its 10:00 resolves to Dec 31 10:00 (+14), the same instant.
    assert preview(rule, utc(2011, 12, 28, 0), 3) == [utc(2011, 12, 28, 20), utc(2011, 12, 29, 20),
                                                        utc(2011, 12, 30, 20)]


def test_shadow_dateutil_candidate_agrees_over_a_year_with_transitions():
    rule = rrule("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0", zone="Europe/London",
                 exdates=["2027-12-31T17:00:00"], rdates=["2027-06-01T09:00:00"])
    assert compare_window(rule, utc(2027, 1, 1), 400, dateutil_next) == []
    hourly = rrule("FREQ=HOURLY;BYMINUTE=30", dtstart="2027-03-01T00:00:00", zone="America/New_York")
    assert compare_window(hourly, utc(2027, 3, 12), 4, dateutil_next) == []


# --------------------------------------------------------------------------------------
# Hostile values: 400 with the field named, in bounded time
# --------------------------------------------------------------------------------------

HOSTILE = [
    ({"rrule": "RRULE:FREQ=DAILY"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY\nRRULE:FREQ=WEEKLY"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;DTSTART=20270101T000000"}, "recurrence.rrule"),
    ({"rrule": "DTSTART:20270101T000000\nRRULE:FREQ=DAILY"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;FREQ=WEEKLY"}, "recurrence.rrule"),
    ({"rrule": "BYHOUR=9"}, "recurrence.rrule"),
    ({"rrule": "FREQ=FORTNIGHTLY"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;BYHOUR=24"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;BYEASTER=0"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;COUNT=1000000000"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;COUNT=0"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;INTERVAL=0"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;INTERVAL=99999999999999999999"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;COUNT=5;UNTIL=20280101"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;UNTIL=20200101T000000"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;UNTIL=20271301"}, "recurrence.rrule"),
    ({"rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=31"}, "recurrence.rrule"),
    ({"rrule": "FREQ=SECONDLY;BYMONTH=4;BYMONTHDAY=31"}, "recurrence.rrule"),
    ({"rrule": "FREQ=YEARLY;BYYEARDAY=1,2,3;BYSETPOS=366"}, "recurrence.rrule"),
    ({"rrule": "FREQ=YEARLY;BYHOUR=" + ",".join(map(str, range(24))) + ";BYMINUTE="
      + ",".join(map(str, range(60)))}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY;" + "BYMINUTE=1," * 100}, "recurrence.rrule"),
    ({"rrule": 5}, "recurrence.rrule"),
    ({"rrule": "FREQ=DAILY\u00e9"}, "recurrence.rrule"),
    ({"rrule": ""}, "recurrence.rrule"),
    ({"dtstart": "2027-01-01T00:00:00Z"}, "recurrence.dtstart"),
    ({"dtstart": "2027-01-01"}, "recurrence.dtstart"),
    ({"dtstart": "0001-01-01T00:00:00"}, "recurrence.dtstart"),
    ({"dtstart": "9999-12-31T12:00:00"}, "recurrence.dtstart"),
    ({"dtstart": "2027-02-30T00:00:00"}, "recurrence.dtstart"),
    ({"dtstart": None}, "recurrence.dtstart"),
    ({"exdates": "2027-01-01T00:00:00"}, "recurrence.exdates"),
    ({"exdates": ["2027-01-01T00:00:00+01:00"]}, "recurrence.exdates"),
    ({"rdates": [f"2027-01-01T00:00:{i % 60:02d}" for i in range(1001)]}, "recurrence.rdates"),
    ({"rdates": [7]}, "recurrence.rdates"),
]


@pytest.mark.parametrize("override,field", HOSTILE)
def test_hostile_rrule_is_refused_with_its_field_in_bounded_time(override, field):
    data = {"kind": "rrule", "rrule": "FREQ=DAILY", "dtstart": "2027-01-01T00:00:00", **override}
    started = time.perf_counter()
    with pytest.raises(InvalidRRule) as raised:
        parse_rule(data)
    assert time.perf_counter() - started < 2
    assert raised.value.field == field
    assert raised.value.code == "invalid_recurrence"


def test_missing_fields_and_unknown_keys():
    with pytest.raises(InvalidRRule) as raised:
        parse_rule({"kind": "rrule", "dtstart": "2027-01-01T00:00:00"})
    assert raised.value.field == "recurrence.rrule"
    with pytest.raises(InvalidRRule) as raised:
        parse_rule({"kind": "rrule", "rrule": "FREQ=DAILY"})
    assert raised.value.field == "recurrence.dtstart"
    with pytest.raises(Exception) as raised:
        parse_rule({"kind": "rrule", "rrule": "FREQ=DAILY", "dtstart": "2027-01-01T00:00:00", "count": 3})
    assert raised.value.field == "recurrence.count"
    with pytest.raises(InvalidTimezone):
        rrule("FREQ=DAILY", zone="Mars/Olympus")


@pytest.mark.parametrize("text", [
    "FREQ=SECONDLY", "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0;BYMINUTE=0;BYSECOND=0",
    "FREQ=MINUTELY;BYSETPOS=1", "FREQ=YEARLY;INTERVAL=1000", "FREQ=DAILY;COUNT=10000",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
])
def test_accepted_but_costly_rules_answer_in_bounded_time(text):
    started = time.perf_counter()
    rule = rrule(text, dtstart="1900-01-01T00:00:00")
    preview(rule, utc(2027, 5, 1), 5)
    preview(rule, utc(2027, 5, 1), 5)
    assert time.perf_counter() - started < 2


def test_console_reads_the_rule_as_written_with_its_zone():
    from console.words import rule_in_words, rule_syntax

    data = {"kind": "rrule", "rrule": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0", "dtstart": "2027-01-01T00:00:00",
            "timezone": "Europe/London", "exdates": ["2027-12-31T17:00:00"], "rdates": []}
    assert rule_in_words(data) == ("RRULE FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0 from 2027-01-01 00:00:00, "
                                   "except 1 date (Europe/London)")
    assert rule_syntax(data) == "RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0 DTSTART:2027-01-01T00:00:00"
    assert rule_in_words({**data, "rrule": "FREQ=NEVER"}) == "unreadable rule"
