"""Calendars on instants (pure): which instants a schedule's calendars exclude, where a
shifted instant moves, and the ``business_day`` kind's days.

A calendar excludes local dates in its own zone (``CalendarDays.zone``): dates, annual
dates (month, day) and ISO weekdays. A business day is a Monday-Friday (on the rule's wall
clock) that no calendar excludes. A schedule's ``calendar`` policy decides what happens to
an excluded rule instant:

* ``skip``: it is no occurrence (the materializer records it as skipped);
* ``shift_before`` / ``shift_after``: it moves to the same local time (rule zone, cron's DST
  policy) on the nearest earlier / later business day; an instant met by several is one
  occurrence. With no business day within ``MAX_SHIFT_DAYS`` it is skipped.

Every search is bounded: ``MAX_SEARCH_STEPS`` rule instants or excluded days per query.
"""

from __future__ import annotations

import functools
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Callable
from zoneinfo import ZoneInfo

from schedules.recurrence.wallclock import resolve

POLICIES = ("skip", "shift_before", "shift_after")
MAX_SHIFT_DAYS = 366  # a shift looks this many days for a business day; none: the instant is skipped
MAX_SEARCH_STEPS = 4000  # rule instants (or excluded days) one query may examine
_MICRO = timedelta(microseconds=1)
_DST_MARGIN = timedelta(hours=2, minutes=1)  # more than any offset change in tzdata (Troll: 2 hours)

RawNext = Callable[[datetime], "datetime | None"]


@dataclass(frozen=True)
class CalendarDays:
    """One calendar's exclusions, as of one of its revisions."""

    calendar_id: str
    zone: ZoneInfo
    dates: frozenset[date] = frozenset()
    annual: frozenset[tuple[int, int]] = frozenset()  # (month, day)
    weekdays: frozenset[int] = frozenset()  # ISO: 1 = Monday

    def excludes_date(self, day: date) -> bool:
        return day in self.dates or (day.month, day.day) in self.annual or day.isoweekday() in self.weekdays

    def excludes(self, instant: datetime) -> bool:
        """Whether the local date of ``instant`` in this calendar's zone is excluded."""
        try:
            return self.excludes_date(instant.astimezone(self.zone).date())
        except OverflowError:
            return True  # no date to show: never an occurrence


@dataclass(frozen=True)
class CalendarSet:
    """The calendars a rule consults, and the schedule's policy for excluded instants."""

    calendars: tuple[CalendarDays, ...]
    policy: str = "skip"

    def excluding(self, instant: datetime) -> CalendarDays | None:
        """The first calendar excluding ``instant``; None: not excluded."""
        for calendar in self.calendars:
            if calendar.excludes(instant):
                return calendar
        return None

    def excluded_by(self, instant: datetime) -> str | None:
        """The id of the first calendar excluding ``instant``; None: not excluded."""
        excluding = self.excluding(instant)
        return excluding.calendar_id if excluding is not None else None

    def business(self, instant: datetime, zone: ZoneInfo) -> bool:
        """Monday-Friday on ``zone``'s wall clock and excluded by no calendar."""
        return instant.astimezone(zone).isoweekday() <= 5 and self.excluded_by(instant) is None

    def moved(self, instant: datetime, zone: ZoneInfo, memo: dict | None = None) -> datetime | None:
        """Where an excluded ``instant`` goes under the policy; None: skipped. ``memo`` (one
        query's) keeps each (day, time) looked at, so neighbouring instants share the walk."""
        if self.policy == "skip" or not self.has_business_days(zone):
            return None
        step = -1 if self.policy == "shift_before" else 1
        local = instant.astimezone(zone)
        day, clock = local.date(), local.time().replace(tzinfo=None, fold=0)
        memo = {} if memo is None else memo
        try:
            for distance in range(1, MAX_SHIFT_DAYS + 1):
                candidate = business_slot(self, zone, day + timedelta(days=step * distance), clock, memo)
                if candidate is not None:
                    return candidate
        except OverflowError:
            pass
        return None

    def has_business_days(self, zone: ZoneInfo) -> bool:
        """False when the weekdays excluded leave none: every weekday, or Monday-Friday in the
        rule's own zone."""
        excluded = frozenset().union(*(calendar.weekdays for calendar in self.calendars))
        if excluded >= frozenset(range(1, 8)):
            return False
        same_zone = all(calendar.zone.key == zone.key for calendar in self.calendars)
        return not (same_zone and excluded >= frozenset(range(1, 6)))


def business_slot(cal: CalendarSet, zone: ZoneInfo, day: date, clock: time, memo: dict) -> datetime | None:
    """The instant of ``clock`` on ``day`` (rule zone) when that is a business day, else None."""
    key = (day, clock)
    if key not in memo:
        candidate = resolve(datetime.combine(day, clock), zone)
        memo[key] = candidate if cal.business(candidate, zone) else None
    return memo[key]


# --------------------------------------------------------------------------------------
# Occurrences of a rule under a calendar policy. ``raw_next(t)`` is the rule's own next
# instant strictly after t (None: no more).
# --------------------------------------------------------------------------------------


def next_occurrence(raw_next: RawNext, cal: CalendarSet, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after``."""
    if cal.policy == "skip":
        return _next_kept(raw_next, cal, zone, after)
    found = _next_moved(raw_next, cal, zone, after)
    return found[0] if found else None


def shifted_from(raw_next: RawNext, cal: CalendarSet, zone: ZoneInfo, occurrence: datetime) -> datetime | None:
    """The rule instant that moved to ``occurrence`` (the earliest, when several did); None
    when ``occurrence`` is a rule instant of its own or no instant moved there."""
    if cal.policy == "skip":
        return None
    found = _next_moved(raw_next, cal, zone, occurrence - _MICRO)
    if found is None or found[0] != occurrence:
        return None
    return found[1]


def excluded_between(raw_next: RawNext, cal: CalendarSet, zone: ZoneInfo, after: datetime, until: datetime,
                     *, limit: int, moved_too: bool = False) -> list[tuple[datetime, str]]:
    """Rule instants in (after, until) that the calendars exclude and that are not moved
    elsewhere (``moved_too``: moved ones as well), with the excluding calendar; at most ``limit``."""
    found: list[tuple[datetime, str]] = []
    cursor, memo = after, {}
    for _ in range(MAX_SEARCH_STEPS):
        if len(found) >= limit:
            break
        instant = raw_next(cursor)
        if instant is None or instant >= until:
            break
        calendar_id = cal.excluded_by(instant)
        if calendar_id is not None and (moved_too or cal.moved(instant, zone, memo) is None):
            found.append((instant, calendar_id))
        cursor = instant
    return found


def _next_kept(raw_next: RawNext, cal: CalendarSet, zone: ZoneInfo, after: datetime) -> datetime | None:
    cursor = after
    for _ in range(MAX_SEARCH_STEPS):
        instant = raw_next(cursor)
        if instant is None:
            return None
        excluding = cal.excluding(instant)
        if excluding is None:
            return instant
        # The whole local day (in the excluding calendar's zone) is excluded: jump past it.
        cursor = max(instant, _day_end(instant, excluding.zone))
    return None


def _day_end(instant: datetime, zone: ZoneInfo) -> datetime:
    """The last microsecond of ``instant``'s local day in ``zone``."""
    try:
        following = instant.astimezone(zone).date() + timedelta(days=1)
        return resolve(datetime.combine(following, time(0)), zone) - _MICRO
    except OverflowError:
        return instant


def _next_moved(raw_next: RawNext, cal: CalendarSet, zone: ZoneInfo,
                after: datetime) -> tuple[datetime, datetime | None] | None:
    """(the first occurrence after ``after``, the rule instant it moved from or None)."""
    later = cal.policy == "shift_after"
    memo: dict = {}
    cursor = _moved_lookback(cal, zone, after, memo) if later else after
    best: tuple[datetime, datetime | None] | None = None
    for _ in range(MAX_SEARCH_STEPS):
        instant = raw_next(cursor)
        if instant is None:
            break
        cursor = instant
        if cal.excluded_by(instant) is None:
            occurrence, source = instant, None
        else:
            occurrence, source = cal.moved(instant, zone, memo), instant
        if occurrence is not None and occurrence > after:
            if best is None or occurrence < best[0] or (occurrence == best[0] and best[1] is not None
                                                       and (source is None or source < best[1])):
                best = (occurrence, source)
        if source is not None:
            cursor = _past_moved_segment(cursor, instant, occurrence, after, zone, cal)
        if best is None:
            continue
        if later:
            # A later instant moves later still, or stays: none can beat `best` any more.
            if instant > best[0]:
                break
        else:
            # An instant moves back at most to the nearest business day before it: once a
            # business day lies after `best`'s day, later instants land after `best`.
            if instant > best[0] and _business_between(cal, zone, best[0], instant, memo):
                break
    return best


def _past_moved_segment(cursor: datetime, instant: datetime, occurrence: datetime | None, after: datetime,
                        zone: ZoneInfo, cal: CalendarSet) -> datetime:
    """Where to look next after the excluded ``instant``. The later instants of its segment
    (the same local day in the rule's zone and in the excluding calendar's) move to the same
    day at later times: past `after` already, none can beat it (or none moves at all), so
    the segment is done; else the first that can pass `after` is about `after` less the move,
    give or take a DST change."""
    excluding = cal.excluding(instant)
    segment_end = min(_day_end(instant, zone), _day_end(instant, excluding.zone))
    if occurrence is None or occurrence > after:
        return max(cursor, segment_end)
    return max(cursor, min(after - (occurrence - instant) - _DST_MARGIN, segment_end))


def _business_between(cal: CalendarSet, zone: ZoneInfo, start: datetime, end: datetime, memo: dict) -> bool:
    """Whether a business day lies after ``start``'s local day, up to ``end``'s (inclusive)."""
    first, last = start.astimezone(zone), end.astimezone(zone)
    day = first.date() + timedelta(days=1)
    clock = first.time().replace(tzinfo=None, fold=0)
    for _ in range(MAX_SHIFT_DAYS):
        if day > last.date():
            return False
        if business_slot(cal, zone, day, clock, memo) is not None:
            return True
        day += timedelta(days=1)
    return True


def _moved_lookback(cal: CalendarSet, zone: ZoneInfo, after: datetime, memo: dict) -> datetime:
    """Where a shift_after search starts: an instant moved past ``after`` lies in the run of
    non-business days just before ``after``'s local day (or on it)."""
    local = after.astimezone(zone)
    clock = time(12)
    day = local.date()
    try:
        for _ in range(MAX_SHIFT_DAYS):
            previous = day - timedelta(days=1)
            if business_slot(cal, zone, previous, clock, memo) is not None:
                break
            day = previous
        return min(resolve(datetime.combine(day, time(0)), zone) - _MICRO, after)
    except OverflowError:
        return after


# --------------------------------------------------------------------------------------
# The business_day kind: the n-th (1-based; negative from the end) business day of each
# month, at a local time.
# --------------------------------------------------------------------------------------

MAX_BUSINESS_DAY = 23
SEARCH_MONTHS = 120  # months searched for the next instant before giving up


def next_business_day(days: tuple[int, ...], at: time, cal: CalendarSet, zone: ZoneInfo,
                      after: datetime) -> datetime | None:
    local = after.astimezone(zone)
    year, month = local.year, local.month
    for _ in range(SEARCH_MONTHS):
        instants = _month_instants(days, at, cal, zone, year, month)
        for instant in instants:
            if instant > after:
                return instant
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        if year > 9999:
            return None
    return None


@functools.lru_cache(maxsize=4096)
def _month_instants(days, at, cal, zone, year, month) -> tuple[datetime, ...]:
    """The month's chosen instants; cached: a rule asks about the same months again and
    again, and the calendars (frozen, hashed once) key it."""
    business: list[datetime | None] = []
    for number in range(1, monthrange(year, month)[1] + 1):
        day = date(year, month, number)
        if day.isoweekday() > 5:
            continue
        try:
            instant = resolve(datetime.combine(day, at), zone)
            if cal.excluded_by(instant) is not None:
                continue
        except OverflowError:
            # Its local time lies past datetime's range (the last hours of 9999): still a
            # business day of the count, never an instant.
            instant = None
        business.append(instant)
    chosen = set()
    for n in days:
        index = n - 1 if n > 0 else len(business) + n
        if 0 <= index < len(business) and business[index] is not None:
            chosen.add(business[index])
    return tuple(sorted(chosen))

