"""The cron matcher: 5-field cron (or 6 with seconds first) compiled into sorted value
sets, and the walk to the next matching local second in a zone.

It does not use croniter: it walks the expanded field sets directly (a few us per
instant versus about 90 us to build and step a croniter).

Grammar, in every dialect: ``*``, values, names, ranges, steps and lists; a 6th leading
field of seconds; ``?`` in a day field means ``*``; ``L``, ``L-n``, ``nW``, ``LW`` in
day-of-month; ``dL`` and ``d#n`` in day-of-week; the ``@`` macros; ``H``, ``H(a-b)``,
``H/n`` (and ``H(a-b)/n``), a value fixed by a stable hash of the rule's hash key (a
schedule's id).

Dialects decide how the two day fields combine (``DIALECTS``):

* ``vixie`` (default): Vixie cron's ``cron.c``: a day field whose text begins with ``*``
  (``?`` too) is unrestricted (DOM_STAR/DOW_STAR, set in ``entry.c``); when neither is, a
  day matches if either field matches, otherwise both must.
* ``and``: both fields must match (celery ``crontab``, systemd).
* ``or``: either matches, unless one field is exactly ``*`` (croniter's default).
"""

from __future__ import annotations

import bisect
import calendar
import functools
import hashlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from schedules.recurrence.errors import InvalidCron
from schedules.recurrence.wallclock import next_resolved

UTC = timezone.utc
MAX_CRON_LENGTH = 200
MAX_HASH_KEY_LENGTH = 100
DIALECTS = ("vixie", "and", "or")
DEFAULT_DIALECT = "vixie"
_ONE_SECOND = timedelta(seconds=1)
_ONE_MINUTE = timedelta(minutes=1)

# --------------------------------------------------------------------------------------
# Cron grammar
# --------------------------------------------------------------------------------------

_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}
_DOW_NAMES = {name: number for number, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict
    hash_low: int  # H without a range: hash_low..hash_high
    hash_high: int


# Day-of-week spans 0-7 so "*/n" and "1-7" behave as in Vixie cron; 7 folds to Sunday (0).
# H in day-of-month stays within 1-28 (as Jenkins' does): every month has it.
_SECOND = _Field("second", 0, 59, {}, 0, 59)
_FIELDS = (
    _Field("minute", 0, 59, {}, 0, 59),
    _Field("hour", 0, 23, {}, 0, 23),
    _Field("day-of-month", 1, 31, {}, 1, 28),
    _Field("month", 1, 12, _MONTH_NAMES, 1, 12),
    _Field("day-of-week", 0, 7, _DOW_NAMES, 0, 6),
)

_ITEM = re.compile(
    r"(?:(?P<star>\*)|(?P<start>[0-9]{1,2}|[a-z]{3})(?:-(?P<end>[0-9]{1,2}|[a-z]{3}))?)"
    r"(?:/(?P<step>[0-9]{1,2}))?",
    re.ASCII,
)
_HASHED = re.compile(r"h(?:\((?P<start>[0-9]{1,2})-(?P<end>[0-9]{1,2})\))?(?:/(?P<step>[0-9]{1,2}))?", re.ASCII)
_LAST_DAY = re.compile(r"l(?:-(?P<offset>[0-9]{1,2}))?", re.ASCII)
_NEAREST_WEEKDAY = re.compile(r"(?P<day>[0-9]{1,2})w", re.ASCII)
_LAST_WEEKDAY_OF = re.compile(r"(?P<dow>[0-9]|[a-z]{3})l", re.ASCII)
_NTH_WEEKDAY = re.compile(r"(?P<dow>[0-9]|[a-z]{3})#(?P<nth>[0-9]{1,2})", re.ASCII)
_SEPARATORS = re.compile(r"[ \t]+")
# Longest month per month number, counting Feb 29 (a leap-day schedule is legitimate).
_MAX_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def value_ranges(values) -> list[str]:
    """Sorted distinct ``values`` as cron list items: runs of consecutive values as ``a-b``,
    the rest alone (``[1, 2, 3, 10]`` -> ``["1-3", "10"]``)."""
    values = sorted(set(values))
    parts, start = [], values[0]
    for previous, value in zip(values, values[1:] + [None]):
        if value is None or value != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = value
    return parts


def normalize_cron(expression: str) -> str:
    """Validate a cron expression and return its canonical text (lowercase, single spaces)."""
    _check_text(expression)
    text = expression.strip(" \t").lower()
    if text.startswith("@"):
        if text not in _ALIASES:
            raise InvalidCron(f"unknown cron alias; use one of {', '.join(sorted(_ALIASES))}")
        return text
    fields = _SEPARATORS.split(text)
    compile_cron(" ".join(fields))
    return " ".join(fields)


def min_period_seconds(expression: str) -> int:
    """A lower bound of the time between two instants: 1 with a seconds field, else 60."""
    return 1 if len(_SEPARATORS.split(expression.strip(" \t"))) == 6 else 60


def uses_hash(expression: str) -> bool:
    """Whether the (canonical) expression has an ``H`` field, whose values the hash key fixes."""
    return "h" in expression and not expression.startswith("@")


def _check_text(expression: str) -> None:
    if len(expression) > MAX_CRON_LENGTH:
        raise InvalidCron(f"cron expression longer than {MAX_CRON_LENGTH} characters")
    if not expression.isascii():
        raise InvalidCron("cron expression must be ASCII")
    if not expression.replace("\t", " ").isprintable():
        raise InvalidCron("cron expression contains control characters")
    if not expression.strip(" \t"):
        raise InvalidCron("cron expression is empty")


@dataclass(frozen=True)
class CronSpec:
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]  # plain day-of-month values (not L/W)
    months: tuple[int, ...]
    weekdays: frozenset[int]  # plain day-of-week values, cron numbering: 0 = Sunday
    day_specials: tuple[tuple, ...]  # ("last", n) = L-n, ("nearest", n) = nW, ("last_weekday",) = LW
    weekday_specials: tuple[tuple, ...]  # (d, 0) = dL, (d, n) = d#n
    day_star: bool  # the field's text is "*" or "?" exactly, or begins with "*": see DIALECTS
    weekday_star: bool
    day_or: bool  # the dialect's verdict: either day field matching is enough
    day_restricted: bool  # the field does not admit every day
    weekday_restricted: bool
    dialect: str = DEFAULT_DIALECT
    _month_days: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


@functools.lru_cache(maxsize=16384)
def compile_cron(expression: str, dialect: str = DEFAULT_DIALECT, hash_key: str | None = None) -> CronSpec:
    """Expand a validated-text cron expression (or alias) into sorted value sets; ``H``
    takes its values from ``hash_key`` (None: the empty key)."""
    _check_text(expression)
    if dialect not in DIALECTS:
        raise InvalidCron(f"unknown cron dialect {dialect!r}; use one of {', '.join(DIALECTS)}", "recurrence.dialect")
    text = expression.strip(" \t").lower()
    text = _ALIASES.get(text, text)
    parts = _SEPARATORS.split(text)
    if len(parts) == 6:
        seconds_text, parts = parts[0], parts[1:]
    elif len(parts) == 5:
        seconds_text = "0"
    else:
        raise InvalidCron(
            f"cron expression must have 5 fields (minute hour day-of-month month day-of-week), or 6 with "
            f"seconds first, got {len(parts)}"
        )
    key = hash_key or ""
    seconds = _expand_field(seconds_text, _SECOND, key)
    minutes, hours = (_expand_field(part, fld, key) for part, fld in zip(parts[:2], _FIELDS[:2]))
    months = _expand_field(parts[3], _FIELDS[3], key)
    days, day_specials = _expand_days(parts[2], key)
    weekdays, weekday_specials = _expand_weekdays(parts[4], key)

    day_text, weekday_text = parts[2], parts[4]
    if dialect == "vixie":
        day_star, weekday_star = day_text[0] in "*?", weekday_text[0] in "*?"
    elif dialect == "or":
        day_star, weekday_star = day_text in ("*", "?"), weekday_text in ("*", "?")
    else:
        day_star = weekday_star = True
    spec = CronSpec(
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=tuple(sorted(days)),
        months=tuple(sorted(months)),
        weekdays=frozenset(weekdays),
        day_specials=day_specials,
        weekday_specials=weekday_specials,
        day_star=day_star,
        weekday_star=weekday_star,
        day_or=not (day_star or weekday_star),
        day_restricted=bool(day_specials) or len(days) < 31,
        weekday_restricted=bool(weekday_specials) or len(weekdays) < 7,
        dialect=dialect,
    )
    # Checked without a key (as a request is validated): a key's H values never make a
    # stored rule raise; one that can never match just has no next instant.
    if hash_key is None and not _ever_matches(spec):
        raise InvalidCron("day-of-month never occurs in the selected months"
                          + ("" if spec.day_or or not spec.weekday_restricted else " on the selected days of week"))
    return spec


def _hashed(key: str, field_name: str, item: int, span: int) -> int:
    """A stable value in 0..span-1 for (key, field, item): SHA-256, never Python's hash()."""
    digest = hashlib.sha256(f"{key}\x00{field_name}\x00{item}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % span


def _expand_field(text: str, fld: _Field, key: str) -> set[int]:
    values: set[int] = set()
    if not text:
        raise InvalidCron(f"{fld.name} field is empty")
    for number, item in enumerate(text.split(",")):
        if item == "?" and fld.name in ("day-of-month", "day-of-week"):
            item = "*"
        hashed = _HASHED.fullmatch(item)
        if hashed is not None:
            values.update(_expand_hash(hashed, fld, key, number))
            continue
        match = _ITEM.fullmatch(item)
        if match is None:
            raise InvalidCron(f"{fld.name}: invalid item {item!r} in field {text!r}")
        if match["star"]:
            start, end = fld.low, fld.high
        else:
            start = _field_value(match["start"], fld)
            end = start if match["end"] is None else _field_value(match["end"], fld)
            if match["end"] is None and match["step"] is not None:
                # Vixie cron only allows a step after "*" or a range; "5/15" is a Quartz-ism.
                raise InvalidCron(f"{fld.name} step needs a range or '*', e.g. '*/15' or '5-59/15'")
            if start > end:
                raise InvalidCron(f"{fld.name} range {item!r} is reversed")
        step = 1 if match["step"] is None else int(match["step"])
        if not 1 <= step <= fld.high - fld.low + 1:
            raise InvalidCron(f"{fld.name} step {step} out of range")
        values.update(range(start, end + 1, step))
    return values


def _expand_hash(match, fld: _Field, key: str, number: int) -> range:
    """``H``: one value in the field's hash range; ``H(a-b)``: one in a-b; ``H/n`` (or
    ``H(a-b)/n``): every n-th value from a hashed start in the first n values."""
    if match["start"] is not None:
        low, high = _field_value(match["start"], fld), _field_value(match["end"], fld)
        if low > high:
            raise InvalidCron(f"{fld.name} range in {match[0].upper()!r} is reversed")
    else:
        low, high = fld.hash_low, fld.hash_high
    if match["step"] is None:
        value = low + _hashed(key, fld.name, number, high - low + 1)
        return range(value, value + 1)
    step = int(match["step"])
    if not 1 <= step <= high - low + 1:
        raise InvalidCron(f"{fld.name} step {step} out of range in {match[0].upper()!r}")
    return range(low + _hashed(key, fld.name, number, step), high + 1, step)


def _expand_days(text: str, key: str) -> tuple[set[int], tuple]:
    """Day-of-month: plain items, and ``L``, ``L-n``, ``nW``, ``LW``."""
    fld, plain, specials = _FIELDS[2], [], []
    for item in text.split(","):
        if item == "lw":
            specials.append(("last_weekday",))
        elif (match := _LAST_DAY.fullmatch(item)) is not None:
            offset = int(match["offset"] or 0)
            if not 0 <= offset <= 30:
                raise InvalidCron(f"day-of-month {item.upper()!r}: L-n takes n from 0 to 30")
            specials.append(("last", offset))
        elif (match := _NEAREST_WEEKDAY.fullmatch(item)) is not None:
            day = int(match["day"])
            if not 1 <= day <= 31:
                raise InvalidCron(f"day-of-month {item.upper()!r}: nW takes a day from 1 to 31")
            specials.append(("nearest", day))
        else:
            plain.append(item)
    days = _expand_field(",".join(plain), fld, key) if plain else set()
    return days, tuple(sorted(set(specials)))


def _expand_weekdays(text: str, key: str) -> tuple[set[int], tuple]:
    """Day-of-week: plain items (7 folds to 0), and ``dL``, ``d#n``."""
    fld, plain, specials = _FIELDS[4], [], []
    for item in text.split(","):
        if (match := _LAST_WEEKDAY_OF.fullmatch(item)) is not None:
            specials.append((_field_value(match["dow"], fld) % 7, 0))
        elif (match := _NTH_WEEKDAY.fullmatch(item)) is not None:
            nth = int(match["nth"])
            if not 1 <= nth <= 5:
                raise InvalidCron(f"day-of-week {item.upper()!r}: d#n takes n from 1 to 5")
            specials.append((_field_value(match["dow"], fld) % 7, nth))
        else:
            plain.append(item)
    weekdays = _expand_field(",".join(plain), fld, key) if plain else set()
    return {0 if value == 7 else value for value in weekdays}, tuple(sorted(set(specials)))


def _field_value(token: str, fld: _Field) -> int:
    if token.isdigit():
        value = int(token)
    elif token in fld.names:
        value = fld.names[token]
    else:
        raise InvalidCron(f"{fld.name} value {token!r} is not a number or a known name")
    if not fld.low <= value <= fld.high:
        raise InvalidCron(f"{fld.name} value {value} out of range {fld.low}-{fld.high}")
    return value


# --------------------------------------------------------------------------------------
# Days of a month
# --------------------------------------------------------------------------------------

_ALL_DAYS = tuple(range(1, 32))


def matching_days(spec: CronSpec, first_weekday: int, last: int) -> tuple[int, ...]:
    """The days of a month whose first day is cron weekday ``first_weekday`` (0 = Sunday)
    and whose last day is ``last`` that satisfy the day fields under the spec's dialect."""
    by_day = _by_day_of_month(spec, first_weekday, last)
    by_weekday = _by_day_of_week(spec, first_weekday, last)
    if spec.day_or:
        days = by_day | by_weekday
    else:
        days = by_day & by_weekday
    return tuple(sorted(days))


def _weekday_of(first_weekday: int, day: int) -> int:
    return (first_weekday + day - 1) % 7


def _by_day_of_month(spec: CronSpec, first_weekday: int, last: int) -> set[int]:
    days = {day for day in spec.days if day <= last}
    for special in spec.day_specials:
        if special[0] == "last":
            if last - special[1] >= 1:
                days.add(last - special[1])
        elif special[0] == "nearest":
            days.update(_nearest_weekday(first_weekday, last, special[1]))
        else:  # LW: the last Monday-Friday
            day = last
            while _weekday_of(first_weekday, day) in (0, 6):
                day -= 1
            days.add(day)
    return days


def _nearest_weekday(first_weekday: int, last: int, day: int) -> tuple[int, ...]:
    """Quartz's ``nW``: the Monday-Friday nearest day ``day``, never in another month; none
    when the month has no day ``day``."""
    if day > last:
        return ()
    weekday = _weekday_of(first_weekday, day)
    if weekday == 6:  # Saturday: the Friday before, or the Monday after the 1st
        return (day - 1,) if day > 1 else (day + 2,)
    if weekday == 0:  # Sunday: the Monday after, or the Friday before the last day
        return (day + 1,) if day < last else (day - 2,)
    return (day,)


def _by_day_of_week(spec: CronSpec, first_weekday: int, last: int) -> set[int]:
    days = set()
    if spec.weekdays:
        if len(spec.weekdays) == 7:
            days.update(range(1, last + 1))
        else:
            days.update(day for day in range(1, last + 1) if _weekday_of(first_weekday, day) in spec.weekdays)
    for weekday, nth in spec.weekday_specials:
        first = 1 + (weekday - first_weekday) % 7
        if nth == 0:  # dL: the last one
            days.add(first + 7 * ((last - first) // 7))
        elif first + 7 * (nth - 1) <= last:
            days.add(first + 7 * (nth - 1))
    return days


def _ever_matches(spec: CronSpec) -> bool:
    """Whether some real date satisfies the day fields in a selected month: each month
    starts on every weekday in some year (Feb 29 included), so the month shapes are enough."""
    for month in spec.months:
        lasts = (28, 29) if month == 2 else (_MAX_MONTH_DAYS[month],)
        for last in lasts:
            for first_weekday in range(7):
                if matching_days(spec, first_weekday, last):
                    return True
    return False


def _month_days(spec: CronSpec, year: int, month: int) -> tuple[int, ...]:
    cache = spec._month_days
    days = cache.get((year, month))
    if days is None:
        if len(cache) > 2048:
            cache.clear()
        first_weekday, last = calendar.monthrange(year, month)
        days = cache[year, month] = matching_days(spec, (first_weekday + 1) % 7, last)
    return days


# --------------------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------------------


def next_cron(spec: CronSpec, zone: ZoneInfo, after: datetime) -> datetime | None:
    """Smallest resolution of a matching local slot strictly after ``after``, under the DST
    policy of every calendar rule (recurrence.wallclock): slots a second apart for a rule
    with seconds, a minute apart otherwise."""
    resolution = _ONE_MINUTE if spec.seconds == (0,) else _ONE_SECOND
    return next_resolved(lambda start: _first_slot_from(spec, start), zone, after, resolution=resolution)


def _first_slot_from(spec: CronSpec, start: datetime) -> datetime | None:
    """First naive local second >= ``start`` matching the cron fields (no zone involved)."""
    year, month, day, hour, minute, second = (start.year, start.month, start.day, start.hour, start.minute,
                                              start.second)
    # Validation guarantees a match within decades (a 5th Friday of February needs a leap
    # year starting on a Friday); the year bound keeps even that finite.
    while year <= 9999:
        if month not in spec.months:
            index = bisect.bisect_left(spec.months, month)
            if index == len(spec.months):
                year += 1
                month = spec.months[0]
            else:
                month = spec.months[index]
            day, hour, minute, second = 1, 0, 0, 0
            continue

        days = _month_days(spec, year, month)
        index = bisect.bisect_left(days, day)
        if index == len(days):
            month += 1
            if month > 12:
                year, month = year + 1, 1
            day, hour, minute, second = 1, 0, 0, 0
            continue
        if days[index] != day:
            day, hour, minute, second = days[index], 0, 0, 0

        index = bisect.bisect_left(spec.hours, hour)
        if index == len(spec.hours):
            day, hour, minute, second = day + 1, 0, 0, 0
            continue
        if spec.hours[index] != hour:
            hour, minute, second = spec.hours[index], 0, 0

        index = bisect.bisect_left(spec.minutes, minute)
        if index == len(spec.minutes):
            hour, minute, second = hour + 1, 0, 0
            continue
        if spec.minutes[index] != minute:
            minute, second = spec.minutes[index], 0

        index = bisect.bisect_left(spec.seconds, second)
        if index == len(spec.seconds):
            minute, second = minute + 1, 0
            continue
        return datetime(year, month, day, hour, minute, spec.seconds[index])
    return None


def day_matches(spec: CronSpec, day: date) -> bool:
    """Whether the local date ``day`` satisfies the month and day fields."""
    return day.month in spec.months and day.day in _month_days(spec, day.year, day.month)
