"""Cron dialects and the v1.2 syntax, against implementations that share no code with
schedules.recurrence.cron: a transcription of Vixie cron's day match (cron.c), calendar
arithmetic written here for L / W / #, croniter where it agrees, and a per-slot property
across DST transitions."""

import calendar
import hashlib
import random
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from schedules.recurrence import InvalidCron, RecurrenceError, instants_between, next_after, parse_rule, preview
from schedules.recurrence.cron import compile_cron, day_matches
from schedules.recurrence.dialects import day_field_warnings
from tests.schedules.test_recurrence_properties import oracle_parse

UTC = timezone.utc
START = date(2024, 1, 1)
DAYS = [START + timedelta(days=n) for n in range(3 * 366)]


def rule(cron, zone="UTC", dialect=None, key=None):
    data = {"kind": "cron", "cron": cron, "timezone": zone}
    if dialect:
        data["dialect"] = dialect
    if key:
        data["hashKey"] = key
    return parse_rule(data)


def cron_weekday(day: date) -> int:
    return day.isoweekday() % 7


# --------------------------------------------------------------------------------------
# Vixie: a transcription of cron.c's day match
# --------------------------------------------------------------------------------------

DOM_STAR, DOW_STAR = 0x01, 0x02


def vixie_flags(cron: str) -> int:
    """entry.c: `if (ch == '*') e->flags |= DOM_STAR;` for the field's first character."""
    fields = cron.split()
    return (DOM_STAR if fields[2][0] == "*" else 0) | (DOW_STAR if fields[4][0] == "*" else 0)


def vixie_day_matches(cron: str, day: date) -> bool:
    """cron.c: month bit AND (either flag ? dow AND dom : dow OR dom)."""
    spec = oracle_parse(cron)
    flags = vixie_flags(cron)
    if day.month not in spec.months:
        return False
    dom, dow = day.day in spec.doms, cron_weekday(day) in spec.dows
    return (dow and dom) if (flags & DOM_STAR or flags & DOW_STAR) else (dow or dom)


DAY_FIELDS = ["*", "*/10", "*/2", "1-31", "1", "13", "1-7", "1,15", "31", "*/7", "10-20/5", "29"]
WEEKDAY_FIELDS = ["*", "*/2", "0-7", "0-6", "5", "1-5", "mon", "0", "7", "*/3", "sat,sun"]


@pytest.mark.parametrize("dom", DAY_FIELDS)
@pytest.mark.parametrize("dow", WEEKDAY_FIELDS)
def test_vixie_day_rule_matches_cron_c(dom, dow):
    cron = f"0 0 {dom} * {dow}"
    spec = compile_cron(cron, "vixie")
    assert [day for day in DAYS if day_matches(spec, day)] == [day for day in DAYS if vixie_day_matches(cron, day)]


@pytest.mark.parametrize("dom", DAY_FIELDS)
@pytest.mark.parametrize("dow", WEEKDAY_FIELDS)
def test_and_dialect_needs_both_fields(dom, dow):
    cron = f"0 0 {dom} 1-6 {dow}"
    oracle = oracle_parse(cron)
    expected = [d for d in DAYS if d.month in oracle.months and d.day in oracle.doms and cron_weekday(d) in oracle.dows]
    try:
        spec = compile_cron(cron, "and")
    except InvalidCron:
        assert not expected  # e.g. nothing
        return
    assert [day for day in DAYS if day_matches(spec, day)] == expected


def test_the_issue_s_example_fires_on_fridays_that_are_the_1st_11th_21st_31st():
    days = [at.date() for at in preview(rule("0 0 */10 * 5"), datetime(2026, 1, 1, tzinfo=UTC), 6)]
    assert all(d.isoweekday() == 5 and d.day in (1, 11, 21, 31) for d in days)
    assert days[0] == date(2026, 5, 1)
    ored = [at.date() for at in preview(rule("0 0 */10 * 5", dialect="or"), datetime(2026, 1, 1, tzinfo=UTC), 4)]
    assert ored == [date(2026, 1, 2), date(2026, 1, 9), date(2026, 1, 11), date(2026, 1, 16)]


# Croniter's default (day_or=True) agrees with `or` where no field is a full range spelled
# otherwise than `*` (croniter folds those into `*`).
CRONITER_DAY_FIELDS = ["*", "*/10", "1", "13", "1-7", "1,15", "31", "10-20/5"]
CRONITER_WEEKDAY_FIELDS = ["*", "5", "1-5", "mon", "0", "sat,sun", "*/2"]


@pytest.mark.parametrize("dom", CRONITER_DAY_FIELDS)
@pytest.mark.parametrize("dow", CRONITER_WEEKDAY_FIELDS)
def test_or_dialect_matches_croniter(dom, dow):
    cron = f"30 6 {dom} * {dow}"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ours = preview(rule(cron, dialect="or"), start, 40)
    it = croniter(cron, start)
    assert ours == [it.get_next(datetime) for _ in range(40)]


def test_dialect_round_trips_and_rejects_unknown_values():
    assert rule("0 0 1 * 1", dialect="and").to_dict()["dialect"] == "and"
    assert parse_rule(rule("0 0 1 * 1", dialect="or").to_dict()).dialect == "or"
    for bad in ("VIXIE", "quartz", 1, None, ""):
        with pytest.raises(RecurrenceError) as caught:
            parse_rule({"kind": "cron", "cron": "0 0 * * *", "dialect": bad})
        assert caught.value.field == "recurrence.dialect"


def test_ambiguous_day_fields_warning_lists_each_dialect_s_next_five():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    [warning] = day_field_warnings(rule("0 0 13 * 5"), after)
    assert warning["code"] == "ambiguous_day_fields" and warning["message"]
    assert warning["alternatives"]["and"] == ["2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z",
                                              "2026-11-13T00:00:00Z", "2027-08-13T00:00:00Z",
                                              "2028-10-13T00:00:00Z"]
    assert warning["alternatives"]["vixie"] == warning["alternatives"]["or"]
    assert warning["alternatives"]["or"][:3] == ["2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z",
                                                 "2026-01-13T00:00:00Z"]
    assert day_field_warnings(rule("0 0 * * 5"), after) == []
    assert day_field_warnings(rule("0 0 ? * 5"), after) == []
    assert day_field_warnings(rule("0 0 13 * *"), after) == []
    # "31 February or a Monday": `and` never matches; its list is empty.
    [warning] = day_field_warnings(rule("0 0 31 2 mon"), after)
    assert warning["alternatives"]["and"] == [] and len(warning["alternatives"]["vixie"]) == 5


# --------------------------------------------------------------------------------------
# L, W, #: calendar arithmetic written here
# --------------------------------------------------------------------------------------


def month_days(year, month):
    return [date(year, month, d) for d in range(1, calendar.monthrange(year, month)[1] + 1)]


def expected_last(year, month, minus=0):
    return [month_days(year, month)[-1] - timedelta(days=minus)]


def expected_nearest_weekday(year, month, n):
    days = month_days(year, month)
    if n > len(days):
        return []
    target = date(year, month, n)
    candidates = [d for d in days if d.isoweekday() <= 5]
    # nearest Monday-Friday in the month; ties cannot happen (a weekend day is 1 or 2 from one)
    best = min(candidates, key=lambda d: (abs((d - target).days), d))
    return [best]


def expected_last_weekday(year, month):
    return [max(d for d in month_days(year, month) if d.isoweekday() <= 5)]


def expected_nth(year, month, weekday, nth):
    matching = [d for d in month_days(year, month) if cron_weekday(d) == weekday]
    return [matching[nth - 1]] if len(matching) >= nth else []


def expected_last_of(year, month, weekday):
    return [[d for d in month_days(year, month) if cron_weekday(d) == weekday][-1]]


MONTHS = [(year, month) for year in range(2024, 2033) for month in range(1, 13)]

SPECIAL_CASES = [
    ("L", lambda y, m: expected_last(y, m)),
    ("L-1", lambda y, m: expected_last(y, m, 1)),
    ("L-27", lambda y, m: expected_last(y, m, 27)),
    ("1W", lambda y, m: expected_nearest_weekday(y, m, 1)),
    ("15W", lambda y, m: expected_nearest_weekday(y, m, 15)),
    ("30W", lambda y, m: expected_nearest_weekday(y, m, 30)),
    ("31W", lambda y, m: expected_nearest_weekday(y, m, 31)),
    ("LW", expected_last_weekday),
]


@pytest.mark.parametrize(("field", "expected"), SPECIAL_CASES, ids=[case[0] for case in SPECIAL_CASES])
def test_day_of_month_specials_match_calendar_arithmetic(field, expected):
    spec = compile_cron(f"0 0 {field} * *")
    for year, month in MONTHS:
        assert [d for d in month_days(year, month) if day_matches(spec, d)] == expected(year, month), (year, month)


@pytest.mark.parametrize("weekday", range(7))
def test_day_of_week_specials_match_calendar_arithmetic(weekday):
    last = compile_cron(f"0 0 * * {weekday}L")
    nths = {n: compile_cron(f"0 0 ? * {weekday}#{n}") for n in range(1, 6)}
    for year, month in MONTHS:
        days = month_days(year, month)
        assert [d for d in days if day_matches(last, d)] == expected_last_of(year, month, weekday)
        for n, spec in nths.items():
            assert [d for d in days if day_matches(spec, d)] == expected_nth(year, month, weekday, n)


@pytest.mark.parametrize("cron", ["0 0 L * *", "30 9 15W * *", "0 12 * * 5#3", "0 0 * * 1#5", "0 0 1,L * *",
                                  "0 18 ? * 3#2"])
def test_specials_agree_with_croniter(cron):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    it = croniter(cron, start)
    assert preview(rule(cron), start, 30) == [it.get_next(datetime) for _ in range(30)]


def test_last_weekday_of_month_agrees_with_croniter_spelling():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    it = croniter("0 0 * * L5", start)  # croniter spells "last Friday" L5
    assert preview(rule("0 0 * * 5L"), start, 24) == [it.get_next(datetime) for _ in range(24)]


def test_specials_combine_with_plain_values_under_each_dialect():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    # Vixie: neither field begins with '*': the last day OR any Monday.
    days = [at.date() for at in preview(rule("0 0 L * mon"), after, 6)]
    assert days == [date(2026, 1, 5), date(2026, 1, 12), date(2026, 1, 19), date(2026, 1, 26), date(2026, 1, 31),
                    date(2026, 2, 2)]
    anded = [at.date() for at in preview(rule("0 0 L * mon", dialect="and"), after, 3)]
    assert anded == [date(2026, 8, 31), date(2026, 11, 30), date(2027, 5, 31)]


def test_fifth_friday_only_in_months_that_have_one():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    fridays = [at.date() for at in preview(rule("0 0 * * 5#5"), after, 6)]
    assert fridays == [date(2026, 1, 30), date(2026, 5, 29), date(2026, 7, 31), date(2026, 10, 30),
                       date(2027, 1, 29), date(2027, 4, 30)]
    # A fifth Friday in February needs a leap year whose February starts on a Friday.
    began = time.perf_counter()
    assert next_after(rule("0 0 * 2 5#5"), after) == datetime(2036, 2, 29, tzinfo=UTC)
    assert time.perf_counter() - began < 0.05


# --------------------------------------------------------------------------------------
# Seconds, ?, macros
# --------------------------------------------------------------------------------------


def test_six_fields_put_seconds_first():
    after = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    assert preview(rule("*/15 * * * * *"), after, 4) == [after + timedelta(seconds=s) for s in (15, 30, 45, 60)]
    assert preview(rule("30 0 9 * * mon-fri"), after, 2) == [datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC),
                                                               datetime(2026, 3, 3, 9, 0, 30, tzinfo=UTC)]
    it = croniter("10,40 5 * * * *", after, second_at_beginning=True)
    assert preview(rule("10,40 5 * * * *"), after, 10) == [it.get_next(datetime) for _ in range(10)]


def test_question_mark_is_a_star_in_day_fields():
    after = datetime(2026, 3, 1, tzinfo=UTC)
    assert preview(rule("0 9 ? * mon"), after, 5) == preview(rule("0 9 * * mon"), after, 5)
    assert preview(rule("0 9 15 * ?"), after, 5) == preview(rule("0 9 15 * *"), after, 5)


@pytest.mark.parametrize(("macro", "expansion"), [
    ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@monthly", "0 0 1 * *"), ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@hourly", "0 * * * *"),
])
def test_macros(macro, expansion):
    after = datetime(2026, 3, 1, 7, 30, tzinfo=UTC)
    assert preview(rule(macro, "Europe/Paris"), after, 3) == preview(rule(expansion, "Europe/Paris"), after, 3)


# --------------------------------------------------------------------------------------
# H
# --------------------------------------------------------------------------------------


def test_h_is_fixed_by_the_key_and_spreads_a_thousand_schedules_over_the_day():
    after = datetime(2026, 3, 1, tzinfo=UTC)
    firsts = [next_after(rule("H H * * *", key=f"sch_{n:04d}"), after) for n in range(1000)]
    slots = {(at.hour, at.minute) for at in firsts}
    assert len(slots) > 500 and len({at.hour for at in firsts}) == 24
    again = [next_after(rule("H H * * *", key=f"sch_{n:04d}"), after) for n in range(1000)]
    assert again == firsts


def test_h_forms_stay_in_their_ranges():
    after = datetime(2026, 3, 1, tzinfo=UTC)
    for n in range(200):
        key = f"sch_{n}"
        spec = compile_cron("H(10-19) H/6 H * H", hash_key=key)
        assert len(spec.minutes) == 1 and 10 <= spec.minutes[0] <= 19
        assert len(spec.hours) == 4 and spec.hours[0] in range(6) and spec.hours == tuple(
            range(spec.hours[0], 24, 6))
        assert len(spec.days) == 1 and 1 <= spec.days[0] <= 28
        assert len(spec.weekdays) == 1 and next(iter(spec.weekdays)) in range(7)
        seconds = compile_cron("H/15 * * * * *", hash_key=key).seconds
        assert seconds[0] in range(15) and seconds == tuple(range(seconds[0], 60, 15))
        assert next_after(rule("H H H * *", key=key), after) is not None


def test_h_is_a_stable_hash_not_python_s_hash():
    # The same key gives the same instant in another interpreter with another hash seed.
    key, cron = "sch_stable", "H H(8-17) * * 1-5"
    code = ("from datetime import datetime, timezone; from schedules.recurrence import parse_rule, next_after;"
            f"print(next_after(parse_rule({{'kind': 'cron', 'cron': {cron!r}, 'hashKey': {key!r}}}),"
            " datetime(2026, 3, 1, tzinfo=timezone.utc)).isoformat())")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}).stdout.strip()
               for seed in ("1", "2")}
    assert outputs == {next_after(rule(cron, key=key), datetime(2026, 3, 1, tzinfo=UTC)).isoformat()}
    # And the value is the one SHA-256 of (key, field, item) gives, per the docs.
    digest = hashlib.sha256(f"{key}\x00minute\x000".encode()).digest()
    assert compile_cron(cron, hash_key=key).minutes == (int.from_bytes(digest[:8], "big") % 60,)


def test_a_key_without_h_is_dropped_and_h_without_a_key_uses_the_empty_key():
    assert rule("0 0 * * *", key="sch_1").hash_key is None
    assert "hashKey" not in rule("0 0 * * *", key="sch_1").to_dict()
    assert rule("H 0 * * *").hash_key is None and rule("H 0 * * *").keyed("sch_1").hash_key == "sch_1"


# --------------------------------------------------------------------------------------
# Hostile values: invalid_cron naming the cron field, in bounded time
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cron", "field"), [
    ("0 0 L-40 * *", "day-of-month"), ("0 0 L-31 * *", "day-of-month"), ("0 0 32W * *", "day-of-month"),
    ("0 0 0W * *", "day-of-month"), ("0 0 LL * *", "day-of-month"), ("0 0 W * *", "day-of-month"),
    ("0 0 * * 5#6", "day-of-week"), ("0 0 * * 5#0", "day-of-week"), ("0 0 * * 8L", "day-of-week"),
    ("0 0 * * 8#1", "day-of-week"), ("0 0 * * L", "day-of-week"), ("H(5-2) * * * *", "minute"),
    ("0 H(0-24) * * *", "hour"), ("0 0 H(0-5) * *", "day-of-month"), ("0 0 * H/13 *", "month"),
    ("H/0 * * * * *", "second"), ("? * * * *", "minute"), ("0 ? * * *", "hour"), ("0 0 * ? *", "month"),
    ("60 * * * * *", "second"), ("0 0 * * 1#1#1", "day-of-week"), ("0 0 15W-20 * *", "day-of-month"),
])
def test_invalid_syntax_names_the_field(cron, field):
    began = time.perf_counter()
    with pytest.raises(InvalidCron) as caught:
        rule(cron)
    assert time.perf_counter() - began < 0.05
    assert caught.value.field == "recurrence.cron" and caught.value.message.startswith(field), caught.value.message


@pytest.mark.parametrize(("cron", "dialect"), [
    ("0 0 31 2 *", "vixie"), ("0 0 30 2 ?", "or"), ("0 0 31 2 mon", "and"), ("0 0 31 4,6,9,11 *", "and"),
    ("0 0 30W 2 *", "vixie"), ("0 0 31W 2,4 *", "vixie"), ("0 0 L-30 2 *", "vixie"),
])
def test_never_matching_rules_are_refused_quickly(cron, dialect):
    began = time.perf_counter()
    with pytest.raises(InvalidCron):
        rule(cron, dialect=dialect)
    assert time.perf_counter() - began < 0.05


def test_thirty_first_and_30w_still_fire_in_months_that_have_them():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert [at.month for at in preview(rule("0 0 31W * *"), after, 3)] == [1, 3, 5]
    assert [at.date() for at in preview(rule("0 0 L-30 * *"), after, 3)] == [
        date(2026, 3, 1), date(2026, 5, 1), date(2026, 7, 1)]


# --------------------------------------------------------------------------------------
# DST: each local slot gives exactly one instant
# --------------------------------------------------------------------------------------

# 20 zones with offset changes in 2026-2027 (Troll: 2 hours; Lord Howe: 30 minutes; Havana,
# Santiago and Beirut at or near midnight; Cairo on a Friday), Tehran's last ones (2022) and
# Apia's skipped day (2011).
ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago", "America/Havana",
         "Asia/Beirut", "Antarctica/Troll", "Pacific/Chatham", "Europe/Berlin", "America/Sao_Paulo",
         "Australia/Sydney", "Pacific/Auckland", "America/St_Johns", "Africa/Cairo", "Asia/Jerusalem",
         "Europe/Chisinau", "Pacific/Easter", "America/Los_Angeles", "America/Chicago", "America/Nuuk",
         "Asia/Tehran", "Pacific/Apia"]
TRANSITION_YEARS = {"Asia/Tehran": (2022,), "Pacific/Apia": (2011,)}
DST_CRONS = ["*/20 0-3 L * *", "0 30 1,2 ? * 0#1,0#2,0L", "15 1,2,3 * * 0", "0 0 8W,LW,1W * *", "H/10 H(0-3) * * *",
             "0,30 0,1,2,3 * 3,10,11 0", "0 0 * * 6L"]


def slot_instants(zone: ZoneInfo, spec, low: datetime, high: datetime) -> set:
    """Each matching local slot in the window, resolved with fold=0, written without the module."""
    found = set()
    day = (low - timedelta(days=2)).date()
    while day <= (high + timedelta(days=2)).date():
        if day_matches(spec, day):
            for hour in spec.hours:
                for minute in spec.minutes:
                    for second in spec.seconds:
                        at = datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=zone).astimezone(UTC)
                        if low < at <= high:
                            found.add(at)
        day += timedelta(days=1)
    return found


def transitions(zone: ZoneInfo, year: int):
    cursor = datetime(year, 1, 1, tzinfo=UTC)
    offset = cursor.astimezone(zone).utcoffset()
    while cursor.year == year:
        cursor += timedelta(hours=1)
        if cursor.astimezone(zone).utcoffset() != offset:
            offset = cursor.astimezone(zone).utcoffset()
            yield cursor


@pytest.mark.parametrize("zone_name", ZONES)
def test_each_local_slot_gives_exactly_one_instant_across_transitions(zone_name):
    zone = ZoneInfo(zone_name)
    for cron in DST_CRONS:
        r = rule(cron, zone_name, key="sch_dst")
        spec = compile_cron(r.cron, r.dialect, r.hash_key)
        for year in TRANSITION_YEARS.get(zone_name, (2026, 2027)):
            for change in transitions(zone, year):
                low, high = change - timedelta(days=3), change + timedelta(days=3)
                walked = instants_between(r, low, high, 10_000)
                assert walked == sorted(set(walked)), (cron, change)  # strictly increasing: each once
                assert set(walked) == slot_instants(zone, spec, low, high), (cron, zone_name, change)


def test_random_rules_with_specials_agree_with_the_slot_oracle():
    generator = random.Random(34)
    doms = ["L", "L-2", "15W", "LW", "1,L", "?", "*", "*/3", "1-7"]
    dows = ["5#3", "1L", "*", "?", "1-5", "0#1,6L", "2"]
    for _ in range(150):
        cron = (f"{generator.choice(['0', '*/20', '0,30'])} {generator.choice(['*', '1,2', '0-3', '23'])} "
                f"{generator.choice(doms)} {generator.choice(['*', '3', '10,11', '1-6'])} {generator.choice(dows)}")
        zone_name = generator.choice(ZONES)
        dialect = generator.choice(["vixie", "and", "or"])
        try:
            r = rule(cron, zone_name, dialect=dialect)
        except InvalidCron:
            continue
        spec = compile_cron(r.cron, r.dialect)
        low = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=generator.randrange(2 * 365 * 24))
        high = low + timedelta(days=20)
        assert set(instants_between(r, low, high, 100_000)) == slot_instants(ZoneInfo(zone_name), spec, low, high), (
            cron, zone_name, dialect, low)


# --------------------------------------------------------------------------------------
# The croniter shadow candidate reads the dialect
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cron", "dialect"), [
    ("0 0 */10 * 5", "vixie"), ("0 0 */10 * 5", "or"), ("0 9 1-7 * mon", "and"), ("0 9 1,15 * mon", "vixie"),
    ("0 9 1,15 * mon", "and"), ("15 30 8 * * 1-5", "vixie"), ("0 0 L * *", "vixie"), ("0 12 ? * 5#2", "vixie"),
])
def test_croniter_shadow_agrees_under_each_dialect(cron, dialect):
    from schedules.recurrence.shadow_candidates import compare_window, croniter_next

    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert compare_window(rule(cron, "Europe/Paris", dialect=dialect), start, 366, croniter_next) == []


def test_croniter_shadow_has_no_opinion_on_syntax_it_lacks():
    from schedules.recurrence.shadow_candidates import croniter_next

    assert croniter_next(rule("0 0 L-3 * *"), datetime(2026, 1, 1, tzinfo=UTC)) is NotImplemented


def test_h_that_picks_a_month_without_the_day_gives_no_instant_in_bounded_time():
    # `31 H`: the request is valid (some months have a 31st); a key may pick one that has
    # none. That stored rule never raises: it has no next instant, found in bounded time.
    keyed = [rule("0 0 31 H *", key=f"k{n}") for n in range(40)]
    never = [r for r in keyed if compile_cron(r.cron, hash_key=r.hash_key).months[0] in (2, 4, 6, 9, 11)]
    assert never
    began = time.perf_counter()
    assert next_after(never[0], datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert time.perf_counter() - began < 1
