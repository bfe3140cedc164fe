"""RFC 5545 RRULE recurrences on a zone's wall clock: python-dateutil expands the rule on
naive local times, recurrence.wallclock maps each local slot to its instant (cron's DST
policy).

Bounded work, whatever the rule:

* a query never expands from ``dtstart``: dateutil's rule is started again at the period
  of the rule that holds the local time asked about (``_started_at``), so a SECONDLY rule
  from year 1 costs what it costs from yesterday. Every default dateutil derives from
  ``dtstart`` (the day of a MONTHLY rule, the time of a DAILY one) stays what it derived.
* a search walks at most ``SEARCH_MONTHS`` months of the calendar without finding an
  instant (a rule that matches nothing, such as the 30th of February, would otherwise walk
  to year 9999); a rule without an instant in that many months of ``dtstart`` is refused.
* a FREQ period holds at most ``MAX_PER_PERIOD`` candidates; ``COUNT`` is at most
  ``MAX_COUNT`` and is expanded once per process into the ``UNTIL`` it amounts to.

dateutil, like this module, does not count a ``dtstart`` that the rule does not match as
an instance (RFC 5545 does).
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from dateutil import rrule as dateutil_rrule

from schedules.recurrence.errors import InvalidRRule
from schedules.recurrence.wallclock import UTC, next_resolved

MAX_RRULE_LENGTH = 500
MAX_DATES = 1000  # exdates, rdates: each at most this many
MAX_COUNT = 10_000
MAX_INTERVAL = 1000
MAX_PER_PERIOD = 20_000  # candidate local times one FREQ period may hold
SEARCH_MONTHS = 1200  # months a search may walk without finding an instant (100 years)
_ONE_SECOND = timedelta(seconds=1)
# Local times the rule's fields may name: a day's margin from datetime's ends.
FIRST_LOCAL = datetime(1, 1, 2)
LAST_LOCAL = datetime(9999, 12, 30, 23, 59, 59)
_PARTS = frozenset({"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY",
                    "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST"})
_PART = re.compile(r"([A-Z]+)=([A-Z0-9,+\-]+)", re.ASCII)
_UNTIL = re.compile(r"([0-9]{8})(?:T([0-9]{6})(Z?))?", re.ASCII)
_LOCAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2})?", re.ASCII)


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RRuleFields:
    text: str  # canonical: upper case, no spaces
    dtstart: datetime  # naive local
    exdates: tuple[datetime, ...]  # sorted, distinct, naive local
    rdates: tuple[datetime, ...]


def parse_rrule_fields(data: dict, zone_name: str) -> RRuleFields:
    """The rrule kind's fields of the API object, checked; InvalidRRule names the field."""
    if "rrule" not in data:
        raise InvalidRRule("recurrence.rrule is required")
    if "dtstart" not in data:
        raise InvalidRRule("recurrence.dtstart is required", "recurrence.dtstart")
    text = normalize_rrule_text(data["rrule"])
    dtstart = parse_local(data["dtstart"], "recurrence.dtstart")
    exdates = _local_list(data.get("exdates", []), "recurrence.exdates")
    rdates = _local_list(data.get("rdates", []), "recurrence.rdates")
    fields = RRuleFields(text=text, dtstart=dtstart, exdates=exdates, rdates=rdates)
    compiled = compile_rrule(text, dtstart, zone_name)  # refuses what dateutil refuses
    if _rule_from(compiled, dtstart) is None:
        raise InvalidRRule(
            f"the rule has no instant from dtstart on (within {SEARCH_MONTHS // 12} years, before UNTIL "
            f"and COUNT): check UNTIL, BYSETPOS and that the BY parts can meet")
    return fields


def normalize_rrule_text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidRRule("recurrence.rrule must be a string")
    if len(value) > MAX_RRULE_LENGTH:
        raise InvalidRRule(f"recurrence.rrule is longer than {MAX_RRULE_LENGTH} characters")
    if not value.isascii() or not value.isprintable():
        raise InvalidRRule("recurrence.rrule must be one line of printable ASCII")
    text = value.strip().upper()
    if text.startswith("RRULE:"):
        raise InvalidRRule("give the rule's value without the 'RRULE:' prefix, e.g. FREQ=DAILY;BYHOUR=9")
    if ":" in text:
        raise InvalidRRule("recurrence.rrule is one RRULE value; DTSTART, EXDATE and RDATE are fields "
                           "of their own (dtstart, exdates, rdates)")
    if not text:
        raise InvalidRRule("recurrence.rrule is empty")
    seen = set()
    for part in text.split(";"):
        match = _PART.fullmatch(part)
        if match is None:
            raise InvalidRRule(f"recurrence.rrule: {part[:40]!r} is not a NAME=VALUE rule part")
        name = match[1]
        if name not in _PARTS:
            raise InvalidRRule(f"recurrence.rrule: unknown rule part {name[:20]!r}")
        if name in seen:
            raise InvalidRRule(f"recurrence.rrule: {name} is given twice")
        seen.add(name)
    if "FREQ" not in seen:
        raise InvalidRRule("recurrence.rrule: FREQ is required")
    if {"COUNT", "UNTIL"} <= seen:
        raise InvalidRRule("recurrence.rrule: COUNT and UNTIL exclude each other")
    return text


def parse_local(value: object, field: str) -> datetime:
    """A local wall-clock time without offset, ``2027-01-01T17:00:00``, to whole seconds."""
    if not isinstance(value, str) or not _LOCAL.fullmatch(value):
        raise InvalidRRule(f"{field} must be a local time without offset, e.g. 2027-01-01T17:00:00", field)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRRule(f"{field} is not a valid date and time", field) from None
    if not FIRST_LOCAL <= parsed <= LAST_LOCAL:
        raise InvalidRRule(f"{field} must be between {FIRST_LOCAL.isoformat()} and {LAST_LOCAL.isoformat()}",
                           field)
    return parsed


def _local_list(value: object, field: str) -> tuple[datetime, ...]:
    if not isinstance(value, list):
        raise InvalidRRule(f"{field} must be a list of local times", field)
    if len(value) > MAX_DATES:
        raise InvalidRRule(f"{field} holds at most {MAX_DATES} local times", field)
    return tuple(sorted({parse_local(item, field) for item in value}))


# --------------------------------------------------------------------------------------
# Compiling: the dateutil rule, metered
# --------------------------------------------------------------------------------------


class _Exhausted(Exception):
    """The search walked SEARCH_MONTHS months without an instant."""


class _MeteredRule(dateutil_rrule.rrule):
    """dateutil's rule, whose walk is metered: dateutil rebuilds its calendar masks at each
    month (each year step of a YEARLY rule) it walks, and reads ``_bynweekday`` then. The
    meter, ``_months_left``, is set on the copy each query walks (``_walker``)."""

    @property
    def _bynweekday(self):
        state = self.__dict__
        left = state.get("_months_left")
        if left is not None:
            if left <= 0:
                raise _Exhausted
            state["_months_left"] = left - 1
        return state["_bynweekday"]

    @_bynweekday.setter
    def _bynweekday(self, value):
        self.__dict__["_bynweekday"] = value


def _walker(rule: _MeteredRule, **changes) -> _MeteredRule:
    """A copy of ``rule`` to walk (from another ``_dtstart``), its meter full."""
    walker = object.__new__(_MeteredRule)
    walker.__dict__.update({**rule.__dict__, "_months_left": SEARCH_MONTHS, **changes})
    return walker


@dataclass(frozen=True)
class CompiledRRule:
    rule: _MeteredRule  # COUNT already turned into UNTIL
    dtstart: datetime
    until: datetime | None


@functools.lru_cache(maxsize=1024)
def compile_rrule(text: str, dtstart: datetime, zone_name: str) -> CompiledRRule:
    """The checked rule text (normalize_rrule_text) from ``dtstart``, ready to query."""
    text = _local_until(text, zone_name)
    try:
        rule = dateutil_rrule.rrulestr(text, dtstart=dtstart, cache=False, ignoretz=True)
    except (ValueError, TypeError, OverflowError, IndexError, KeyError) as exc:
        raise InvalidRRule(f"recurrence.rrule: {str(exc)[:200]}") from None
    if not isinstance(rule, dateutil_rrule.rrule):
        raise InvalidRRule("recurrence.rrule must be a single rule")
    if not 1 <= rule._interval <= MAX_INTERVAL:
        raise InvalidRRule(f"recurrence.rrule: INTERVAL must be between 1 and {MAX_INTERVAL}")
    if rule._count is not None and not 1 <= rule._count <= MAX_COUNT:
        raise InvalidRRule(f"recurrence.rrule: COUNT must be between 1 and {MAX_COUNT}")
    if rule._until is not None and rule._until < dtstart:
        raise InvalidRRule("recurrence.rrule: UNTIL is before dtstart")
    per_period = _candidates_per_period(rule)
    if per_period > MAX_PER_PERIOD:
        raise InvalidRRule(
            f"recurrence.rrule: one FREQ period holds up to {per_period} local times, more than "
            f"{MAX_PER_PERIOD}; use a shorter FREQ")
    rule.__class__ = _MeteredRule
    compiled = CompiledRRule(rule=rule, dtstart=dtstart, until=rule._until)
    if rule._count is not None:
        compiled = _count_as_until(compiled)
    return compiled


def _local_until(text: str, zone_name: str) -> str:
    """UNTIL on the rule's wall clock: an UNTIL in UTC (``...Z``, as RFC 5545 writes it for a
    zoned DTSTART) becomes the local time of that instant; a date alone ends that day."""
    parts = text.split(";")
    for i, part in enumerate(parts):
        if not part.startswith("UNTIL="):
            continue
        match = _UNTIL.fullmatch(part[6:])
        if match is None:
            raise InvalidRRule("recurrence.rrule: UNTIL must be YYYYMMDD, YYYYMMDDTHHMMSS or YYYYMMDDTHHMMSSZ")
        try:
            until = datetime.strptime(match[1] + (match[2] or "235959"), "%Y%m%d%H%M%S")
            if match[3]:
                until = until.replace(tzinfo=UTC).astimezone(ZoneInfo(zone_name)).replace(tzinfo=None)
        except (ValueError, OverflowError):
            raise InvalidRRule("recurrence.rrule: UNTIL is not a valid date and time") from None
        parts[i] = "UNTIL=" + until.strftime("%Y%m%dT%H%M%S")
    return ";".join(parts)


def _candidates_per_period(rule) -> int:
    days = {dateutil_rrule.YEARLY: 366, dateutil_rrule.MONTHLY: 31, dateutil_rrule.WEEKLY: 7}.get(rule._freq, 1)
    if rule._freq < dateutil_rrule.HOURLY:
        times = len(rule._timeset)
    elif rule._freq == dateutil_rrule.HOURLY:
        times = len(rule._byminute) * len(rule._bysecond)
    elif rule._freq == dateutil_rrule.MINUTELY:
        times = len(rule._bysecond)
    else:
        times = 1
    return days * times


def _count_as_until(compiled: CompiledRRule) -> CompiledRRule:
    """A COUNT rule is the same rule until its COUNT-th instant: expanded once, here."""
    walker, last = _walker(compiled.rule), None
    iterator = iter(walker)
    try:
        while True:
            walker._months_left = SEARCH_MONTHS  # per instant found: a COUNT walks as far as it has instants
            try:
                last = next(iterator)
            except StopIteration:
                break
    except _Exhausted:
        pass
    until = last if last is not None else compiled.dtstart - _ONE_SECOND
    bounded = _walker(compiled.rule, _count=None, _until=until, _months_left=None)
    return CompiledRRule(rule=bounded, dtstart=compiled.dtstart, until=until)


# --------------------------------------------------------------------------------------
# Querying
# --------------------------------------------------------------------------------------


def next_rrule(fields: RRuleFields, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first instant of the rule (with its rdates, without its exdates) strictly after
    ``after`` (aware), under cron's DST policy."""
    compiled = compile_rrule(fields.text, fields.dtstart, zone.key)

    def first_slot_from(cursor: datetime) -> datetime | None:
        return _first_slot_from(compiled, fields, cursor)

    return next_resolved(first_slot_from, zone, after, resolution=_ONE_SECOND)


def _first_slot_from(compiled: CompiledRRule, fields: RRuleFields, cursor: datetime) -> datetime | None:
    """The first local time >= ``cursor`` that is an instance or an rdate and no exdate."""
    slot = _rule_from(compiled, cursor)
    # Each exdate skips at most one instance.
    while slot is not None and _contains(fields.exdates, slot):
        slot = _rule_from(compiled, slot + _ONE_SECOND)
    index = bisect.bisect_left(fields.rdates, cursor)
    while index < len(fields.rdates) and _contains(fields.exdates, fields.rdates[index]):
        index += 1
    if index < len(fields.rdates) and (slot is None or fields.rdates[index] < slot):
        return fields.rdates[index]
    return slot


def _contains(ordered: tuple, value) -> bool:
    index = bisect.bisect_left(ordered, value)
    return index < len(ordered) and ordered[index] == value


def _rule_from(compiled: CompiledRRule, cursor: datetime) -> datetime | None:
    """The rule's first instance >= ``cursor``: None past UNTIL, past year 9999, or when
    SEARCH_MONTHS months hold none."""
    if compiled.until is not None and cursor > compiled.until:
        return None
    start = _started_at(compiled, cursor)
    if start is None:
        return None
    try:
        return _walker(compiled.rule, _dtstart=start).after(cursor, inc=True)
    except _Exhausted:
        return None


def _started_at(compiled: CompiledRRule, cursor: datetime) -> datetime | None:
    """Where dateutil may start the rule again so that its instances from ``cursor`` on are
    the rule's: ``cursor`` itself inside a period the INTERVAL steps onto, the start of the
    next such period otherwise (of the week for WEEKLY: BYSETPOS counts from it). None
    past datetime's range."""
    dtstart = compiled.dtstart
    if cursor <= dtstart:
        return dtstart
    rule = compiled.rule
    freq, interval = rule._freq, rule._interval
    try:
        if freq == dateutil_rrule.YEARLY:
            behind = (cursor.year - dtstart.year) % interval
            return cursor if not behind else datetime(cursor.year + interval - behind, 1, 1)
        if freq == dateutil_rrule.MONTHLY:
            month = cursor.year * 12 + cursor.month - 1
            behind = (month - dtstart.year * 12 - dtstart.month + 1) % interval
            if not behind:
                return cursor
            year, month = divmod(month + interval - behind, 12)
            return datetime(year, month + 1, 1)
        if freq == dateutil_rrule.WEEKLY:
            week = _week_start(cursor.date(), rule._wkst)
            behind = ((week - _week_start(dtstart.date(), rule._wkst)).days // 7) % interval
            start = datetime.combine(week + timedelta(weeks=(interval - behind) % interval), time())
            return max(start, dtstart)
        size = {dateutil_rrule.DAILY: 86400, dateutil_rrule.HOURLY: 3600,
                dateutil_rrule.MINUTELY: 60, dateutil_rrule.SECONDLY: 1}[freq]
        step = timedelta(seconds=size)
        behind = ((_floor(cursor, step) - _floor(dtstart, step)) // step) % interval
        return cursor if not behind else _floor(cursor, step) + step * (interval - behind)
    except (ValueError, OverflowError):
        return None


def _week_start(day, wkst: int):
    return day - timedelta(days=(day.weekday() - wkst) % 7)


def _floor(moment: datetime, step: timedelta) -> datetime:
    return moment - (moment - datetime.min) % step
