"""Shadow rollout of a recurrence engine (README, `RECURRENCE_ENGINE`): a candidate engine's
next instants compared with the active one's, before the candidate may decide anything.

A candidate is a function ``(rule, after) -> next instant strictly after, or None`` for the
rules it covers; ``NotImplemented`` means it has no opinion on this kind of rule (croniter
knows nothing of interval or once rules). Pure Python, like the rest of the package.

A candidate expands a rule, never the schedule around it: it is asked about the rule alone
(no window, no calendar policy). For a schedule under calendars the policy (skip, shift) is
then applied to the candidate's instants by the one calendar layer both engines share
(``calendars.next_occurrence``), so a calendar rule is compared on what the candidate knows:
a candidate that expands the rule differently disagrees on the occurrences that follow, moved
or not. ``business_days`` is a candidate for the ``business_day`` kind: the n-th business
day of each month derived separately, by listing the month's days.
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from schedules.recurrence.calendars import next_occurrence
from schedules.recurrence.instants import renderable
from schedules.recurrence.rules import Rule, in_window, next_after

UTC = timezone.utc


@dataclass(frozen=True)
class Mismatch:
    after: datetime  # both engines were asked for the next instant after this one
    active: datetime | None
    candidate: datetime | None


def croniter_next(rule: Rule, after: datetime):
    """croniter's next instant of a cron rule on its zone's wall clock, read in the rule's
    dialect (vixie: croniter's ``implement_cron_bug``; and: ``day_or=False``), seconds first
    for 6 fields and ``H`` hashed from the rule's key (croniter's own hash, not ours: an H
    rule shows as mismatches). Syntax croniter lacks (``L-n``, ``LW``, ...) has no opinion."""
    if rule.kind != "cron":
        return NotImplemented
    from croniter import croniter
    from croniter.croniter import CroniterError

    local = after.astimezone(ZoneInfo(rule.timezone))
    options = {"day_or": rule.dialect != "and", "implement_cron_bug": rule.dialect == "vixie",
               "second_at_beginning": len(rule.cron.split()) == 6, "hash_id": rule.hash_key}
    try:
        iterator = croniter(rule.cron, local, **options)
    except (CroniterError, ValueError, KeyError):
        return NotImplemented
    return iterator.get_next(datetime).astimezone(UTC)


def dateutil_next(rule: Rule, after: datetime):
    """python-dateutil's next instant of an RRULE rule, expanded with zone-aware times from
    its dtstart (no rebasing, no search bound: an oracle, not an engine; its expansion is
    kept per rule), each local time resolved by the zone as zoneinfo reads it (fold=0)."""
    if rule.kind != "rrule":
        return NotImplemented
    zone = ZoneInfo(rule.timezone)
    rules = _zoned_rruleset(rule.rrule, rule.timezone)
    # Wall-clock order is not instant order across a DST gap: a local time up to the zone's
    # offset change before `after` may resolve after it, and the search stops at the first
    # local time no later one can beat.
    offsets = [(after + timedelta(hours=hours)).astimezone(zone).utcoffset() for hours in (-26, 0, 26)]
    spread = max(offsets) - min(offsets)
    wall_after = after.astimezone(zone).replace(tzinfo=None)
    best = None
    for local in rules.xafter((wall_after - spread - timedelta(seconds=1)).replace(tzinfo=zone), inc=True):
        instant = local.astimezone(UTC)
        if instant > after and (best is None or instant < best):
            best = instant
        if best is not None and local.replace(tzinfo=None) - max(offsets) > best.replace(tzinfo=None):
            break
    return best


@functools.lru_cache(maxsize=256)
def _zoned_rruleset(fields, zone_name: str):
    from dateutil.rrule import rrulestr, rruleset

    zone = ZoneInfo(zone_name)
    rules = rruleset(cache=True)
    rules.rrule(rrulestr(_aware_until(fields.text, zone), dtstart=fields.dtstart.replace(tzinfo=zone)))
    for local in fields.rdates:
        rules.rdate(local.replace(tzinfo=zone))
    for local in fields.exdates:
        rules.exdate(local.replace(tzinfo=zone))
    return rules


def _aware_until(text: str, zone: ZoneInfo) -> str:
    """UNTIL as dateutil wants it beside a zoned DTSTART: in UTC."""
    parts = []
    for part in text.split(";"):
        if part.startswith("UNTIL=") and not part.endswith("Z"):
            value = part[6:] if "T" in part else part[6:] + "T235959"
            local = datetime.strptime(value, "%Y%m%dT%H%M%S").replace(tzinfo=zone)
            part = "UNTIL=" + local.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        parts.append(part)
    return ";".join(parts)


BUSINESS_SEARCH_YEARS = 10


def business_days_next(rule: Rule, after: datetime):
    """The next instant of a ``business_day`` rule after ``after``, derived month by month:
    the month's dates in the rule's zone, Monday to Friday, none a bound calendar of the rule
    excludes (its dates, annual dates and ISO weekdays, on the instant's date in the
    calendar's own zone), the n-th of them (negative: from the end) at the local time, a
    local time in a DST gap or fold read as zoneinfo reads it (fold=0)."""
    if rule.kind != "business_day":
        return NotImplemented
    try:
        return _business_days_after(rule, after)
    except OverflowError:  # the edge of datetime's range: no instant to show
        return None


def _business_days_after(rule: Rule, after: datetime) -> datetime | None:
    zone = ZoneInfo(rule.timezone)
    calendars = rule.business.calendars if rule.business is not None else ()
    local = after.astimezone(zone)
    year, month = local.year, local.month
    for _ in range(12 * BUSINESS_SEARCH_YEARS):
        open_days = []
        for number in range(1, calendar.monthrange(year, month)[1] + 1):
            day = date(year, month, number)
            try:
                instant = datetime.combine(day, rule.at_time, tzinfo=zone).astimezone(UTC)
                excluded = any(_excludes(days, instant) for days in calendars)
            except OverflowError:  # a local time past datetime's range: no instant, still a day
                instant, excluded = None, False
            if day.isoweekday() <= 5 and not excluded:
                open_days.append(instant)
        count = len(open_days)
        chosen = sorted({open_days[n - 1 if n > 0 else count + n] for n in rule.days if 0 < abs(n) <= count} - {None})
        later = [instant for instant in chosen if instant > after]
        if later:
            # The next instant within a day of datetime's range is never shown (instants.renderable): none.
            return later[0] if renderable(later[0]) else None
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        if year > 9999:
            return None
    return None


def _excludes(days, instant: datetime) -> bool:
    day = instant.astimezone(days.zone).date()
    return day in days.dates or (day.month, day.day) in days.annual or day.isoweekday() in days.weekdays


BUILTIN_CANDIDATES = {"croniter": croniter_next, "dateutil": dateutil_next, "business_days": business_days_next}


class _NoOpinion(Exception):
    pass


def _candidate_next(rule: Rule, after: datetime, candidate):
    """The candidate's next occurrence after ``after``: its own expansion of the bare rule,
    under the schedule's calendar policy when it has one; NotImplemented: no opinion."""
    bare = replace(rule, calendar_ids=(), calendar_policy=None, calendar=None, active_from=None, active_until=None)
    if rule.calendar is None:
        return candidate(bare, after)

    def raw_next(moment: datetime):
        found = candidate(bare, moment)
        if found is NotImplemented:
            raise _NoOpinion
        return found

    try:
        return next_occurrence(raw_next, rule.calendar, ZoneInfo(rule.timezone), after)
    except _NoOpinion:
        return NotImplemented
    except OverflowError:
        return None


def compare_next(rule: Rule, after: datetime, active: datetime | None, candidate) -> Mismatch | None:
    """The mismatch when the candidate's next instant after ``after`` is not ``active``."""
    theirs = _candidate_next(rule, after, candidate)
    if theirs is not NotImplemented and theirs is not None and not in_window(rule, theirs):
        theirs = None  # candidates know the rule, not the schedule's window (activeFrom/activeUntil)
    if theirs is NotImplemented or theirs == active:
        return None
    return Mismatch(after, active, theirs)


def compare_window(rule: Rule, start: datetime, days: float, candidate, *, limit: int = 100_000) -> list[Mismatch]:
    """Walk the active engine's instants from ``start`` over ``days``; at each, ask the
    candidate for the next one. Returns every disagreement (a candidate off by one instant
    is reported once there, then the walk goes on from the active engine's instant)."""
    end = start + timedelta(days=days)
    mismatches, after = [], start
    for _ in range(limit):
        active = next_after(rule, after)
        mismatch = compare_next(rule, after, active, candidate)
        if mismatch is not None:
            mismatches.append(mismatch)
        if active is None or active > end:
            return mismatches
        after = active
    return mismatches
