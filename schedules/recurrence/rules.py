"""Recurrence rules: parsing the API's ``recurrence`` object, and occurrence math."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

from schedules.recurrence.cron import (
    DEFAULT_DIALECT,
    DIALECTS,
    MAX_HASH_KEY_LENGTH,
    compile_cron,
    next_cron,
    normalize_cron,
    uses_hash,
)
from schedules.recurrence.calendars import (
    MAX_BUSINESS_DAY,
    POLICIES,
    CalendarSet,
    excluded_between,
    next_business_day,
    next_occurrence,
    shifted_from,
)
from schedules.recurrence.errors import InvalidRecurrence, InvalidTimezone
from schedules.recurrence.instants import EARLIEST, LATEST, UTC, InstantOutOfRange, parse_instant, renderable
from schedules.recurrence.rrule import RRuleFields, next_rrule, parse_rrule_fields
# Ten years: long enough for any real schedule, small enough that instant arithmetic
# never leaves datetime's range for realistic anchors.
MAX_SECONDS = 10 * 366 * 86400
# Zone names that are host configuration rather than IANA zones: they would mean
# different things on different workers.
_HOST_ZONE_NAMES = frozenset({"localtime", "posixrules"})


@dataclass(frozen=True)
class Rule:
    kind: str
    timezone: str = "UTC"
    cron: str | None = None
    every_seconds: int | None = None
    anchor: datetime | None = None  # interval only; None until `anchored`
    delay_seconds: int | None = None
    at: datetime | None = None  # once only: the single instant
    rrule: RRuleFields | None = None  # rrule only
    dialect: str = DEFAULT_DIALECT  # cron only: how the day fields combine (cron.DIALECTS)
    hash_key: str | None = None  # cron with H only: what fixes H's values (a schedule's id)
    # The schedule's window (activeFrom, activeUntil), not part of the recurrence object:
    # no instant outside it. Set by `within`.
    active_from: datetime | None = None
    active_until: datetime | None = None
    # business_day only: the n-th business days of each month, the local time, the calendars.
    days: tuple[int, ...] = ()
    at_time: time | None = None
    business_ids: tuple[str, ...] = ()
    # The schedule's `calendar` field (not part of the recurrence object): set by `calendared`.
    calendar_ids: tuple[str, ...] = ()
    calendar_policy: str | None = None
    # The calendars' exclusions, read from the database by `bound` (schedules.calendars).
    calendar: CalendarSet | None = None
    business: CalendarSet | None = None

    def calendared(self, calendar_ids, policy: str | None) -> Rule:
        """This rule under the schedule's calendars and policy (none: no calendar)."""
        ids = tuple(calendar_ids or ())
        return replace(self, calendar_ids=ids, calendar_policy=policy if ids else None, calendar=None)

    def calendar_refs(self) -> frozenset[str]:
        """Every calendar id the rule reads (the schedule's and a business_day kind's)."""
        return frozenset(self.calendar_ids) | frozenset(self.business_ids)

    def bound(self, days_by_id: dict) -> Rule:
        """This rule with its calendars' exclusions (``days_by_id``: id -> CalendarDays)."""
        changes = {}
        if self.calendar_ids:
            changes["calendar"] = CalendarSet(tuple(days_by_id[i] for i in self.calendar_ids if i in days_by_id),
                                              self.calendar_policy or "skip")
        if self.kind == "business_day":
            changes["business"] = CalendarSet(tuple(days_by_id[i] for i in self.business_ids if i in days_by_id))
        return replace(self, **changes) if changes else self

    def anchored(self, default_anchor: datetime) -> Rule:
        """This rule; an interval rule without an anchor takes ``default_anchor``."""
        if self.kind != "interval" or self.anchor is not None:
            return self
        if not isinstance(default_anchor, datetime) or default_anchor.utcoffset() is None:
            raise ValueError("default_anchor must be a timezone-aware datetime")
        return replace(self, anchor=default_anchor.astimezone(UTC))

    def within(self, active_from: datetime | None, active_until: datetime | None) -> Rule:
        """This rule with no instant before ``active_from`` or after ``active_until`` (aware; None: open)."""
        return replace(self, active_from=active_from and _as_utc(active_from),
                       active_until=active_until and _as_utc(active_until))
    def keyed(self, hash_key: str) -> Rule:
        """This rule with ``H`` fixed by ``hash_key`` (a schedule's id); other rules unchanged."""
        if self.kind != "cron" or not uses_hash(self.cron) or self.hash_key == hash_key:
            return self
        return replace(self, hash_key=hash_key)

    def to_dict(self) -> dict:
        if self.kind == "cron":
            data = {"kind": "cron", "cron": self.cron, "timezone": self.timezone, "dialect": self.dialect}
            return {**data, "hashKey": self.hash_key} if self.hash_key is not None else data
        if self.kind == "interval":
            return {
                "kind": "interval",
                "everySeconds": self.every_seconds,
                "anchor": _iso_utc(self.anchor),
                "timezone": self.timezone,
            }
        if self.kind == "once":
            return {"kind": "once", "at": _iso_utc(self.at), "timezone": self.timezone}
        if self.kind == "rrule":
            return _rrule_dict(self)
        if self.kind == "business_day":
            return {"kind": "business_day", "days": list(self.days), "at": self.at_time.strftime("%H:%M:%S"),
                    "timezone": self.timezone, "calendarIds": list(self.business_ids)}
        return {"kind": "after_completion", "delaySeconds": self.delay_seconds, "timezone": self.timezone}



# --------------------------------------------------------------------------------------
# Parsing the API object
# --------------------------------------------------------------------------------------

_ALLOWED_KEYS = {
    "cron": frozenset({"kind", "cron", "timezone", "dialect", "hashKey"}),
    "interval": frozenset({"kind", "everySeconds", "anchor", "timezone"}),
    "after_completion": frozenset({"kind", "delaySeconds", "timezone"}),
    "once": frozenset({"kind", "at", "timezone"}),
    "rrule": frozenset({"kind", "rrule", "dtstart", "timezone", "exdates", "rdates"}),
    "business_day": frozenset({"kind", "days", "at", "timezone", "calendarIds"}),
}
MAX_CALENDARS = 10  # calendar ids one rule or schedule may name
MAX_CALENDAR_ID_LENGTH = 40
_LOCAL_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9]))?", re.ASCII)


def parse_rule(data: dict, *, default_anchor: datetime | None = None, anchor_required: bool = True) -> Rule:
    """Validate the API's ``recurrence`` object and return the normalized Rule.

    ``default_anchor`` is used for an interval rule that omits ``anchor`` (the caller
    typically passes the schedule's creation time). With ``anchor_required=False`` such a
    rule comes back unanchored: requests are parsed before the creation time is known.
    """
    if not isinstance(data, dict):
        raise InvalidRecurrence("recurrence must be an object", "recurrence")
    for key in data:
        if not isinstance(key, str):
            raise InvalidRecurrence("recurrence keys must be strings", "recurrence")

    kind = data.get("kind")
    if "kind" not in data:
        raise InvalidRecurrence("recurrence.kind is required", "recurrence.kind")
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        raise InvalidRecurrence(
            "recurrence.kind must be one of: cron, interval, after_completion, once, rrule, business_day", "recurrence.kind"
        )
    for key in sorted(data):
        if key not in _ALLOWED_KEYS[kind]:
            raise InvalidRecurrence(f"unknown key {key!r} for a {kind} recurrence", f"recurrence.{key}")

    zone_name = _parse_timezone(data.get("timezone", "UTC"))

    if kind == "cron":
        if "cron" not in data:
            raise InvalidRecurrence("recurrence.cron is required", "recurrence.cron")
        expression = data["cron"]
        if not isinstance(expression, str):
            raise InvalidRecurrence("recurrence.cron must be a string", "recurrence.cron")
        dialect = data.get("dialect", DEFAULT_DIALECT)
        if not isinstance(dialect, str) or dialect not in DIALECTS:
            raise InvalidRecurrence(f"recurrence.dialect must be one of: {', '.join(DIALECTS)}", "recurrence.dialect")
        hash_key = _parse_hash_key(data["hashKey"], "recurrence.hashKey") if "hashKey" in data else None
        normalized = normalize_cron(expression)
        compile_cron(normalized, dialect)  # the dialect decides whether the day fields can ever match
        return Rule(kind="cron", timezone=zone_name, cron=normalized, dialect=dialect,
                    hash_key=hash_key if uses_hash(normalized) else None)

    if kind == "interval":
        every = _parse_seconds(data, "everySeconds", minimum=1)
        anchor = _parse_anchor(data["anchor"]) if "anchor" in data else None
        rule = Rule(kind="interval", timezone=zone_name, every_seconds=every, anchor=anchor)
        if default_anchor is not None:
            return rule.anchored(default_anchor)
        if anchor is None and anchor_required:
            raise InvalidRecurrence("recurrence.anchor is required", "recurrence.anchor")
        return rule

    if kind == "once":
        if "at" not in data:
            raise InvalidRecurrence("recurrence.at is required", "recurrence.at")
        return Rule(kind="once", timezone=zone_name, at=_parse_anchor(data["at"], "recurrence.at"))

    if kind == "rrule":
        return Rule(kind="rrule", timezone=zone_name, rrule=parse_rrule_fields(data, zone_name))

    if kind == "business_day":
        return _parse_business_day(data, zone_name)

    delay = _parse_seconds(data, "delaySeconds", minimum=0)
    return Rule(kind="after_completion", timezone=zone_name, delay_seconds=delay)


def _parse_business_day(data: dict, zone_name: str) -> Rule:
    days = data.get("days")
    if not isinstance(days, list) or not 1 <= len(days) <= 2 * MAX_BUSINESS_DAY:
        raise InvalidRecurrence(f"recurrence.days must be a list of 1 to {2 * MAX_BUSINESS_DAY} day numbers",
                                "recurrence.days")
    for n in days:
        if isinstance(n, bool) or not isinstance(n, int) or n == 0 or abs(n) > MAX_BUSINESS_DAY:
            raise InvalidRecurrence(f"recurrence.days: each is a non-zero integer from -{MAX_BUSINESS_DAY} to "
                                    f"{MAX_BUSINESS_DAY} (1: first business day, -1: last)", "recurrence.days")
    at = data.get("at")
    match = _LOCAL_TIME.fullmatch(at) if isinstance(at, str) else None
    if match is None:
        raise InvalidRecurrence("recurrence.at must be a local time HH:MM or HH:MM:SS", "recurrence.at")
    at_time = time(int(match[1]), int(match[2]), int(match[3] or 0))
    ids = parse_calendar_ids(data.get("calendarIds", []), "recurrence.calendarIds")
    return Rule(kind="business_day", timezone=zone_name, days=tuple(sorted(set(days))), at_time=at_time,
                business_ids=ids)


def parse_calendar_ids(value: object, field: str) -> tuple[str, ...]:
    """A list of at most MAX_CALENDARS calendar ids, each once, in the order given."""
    if not isinstance(value, list) or len(value) > MAX_CALENDARS:
        raise InvalidRecurrence(f"{field} must be a list of at most {MAX_CALENDARS} calendar ids", field)
    for item in value:
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_CALENDAR_ID_LENGTH or not item.isascii() \
                or not item.isprintable():
            raise InvalidRecurrence(f"{field}: each is a calendar id (1 to {MAX_CALENDAR_ID_LENGTH} characters)", field)
    return tuple(dict.fromkeys(value))


def check_calendar_policy(rule: Rule) -> None:
    """A shift policy looks at the instants of whole days: refused for rules firing more than
    once a minute (400 on `calendar.policy`); `skip` takes any rule."""
    if rule.calendar_policy in (None, "skip"):
        return
    if rule.kind == "after_completion":
        raise InvalidRecurrence("calendar does not apply to an after_completion recurrence", "calendar")
    frequent = (
        (rule.kind == "interval" and rule.every_seconds < 60)
        or (rule.kind == "cron" and len(compile_cron(rule.cron, rule.dialect, rule.hash_key).seconds) > 1)
        or (rule.kind == "rrule" and ("FREQ=SECONDLY" in rule.rrule.text
                                      or re.search(r"BYSECOND=[0-9]+,", rule.rrule.text) is not None))
    )
    if frequent:
        raise InvalidRecurrence(f"calendar.policy {rule.calendar_policy} needs a rule firing at most once a minute",
                                "calendar.policy")


def parse_calendar_policy(value: object, field: str = "calendar.policy") -> str:
    if not isinstance(value, str) or value not in POLICIES:
        raise InvalidRecurrence(f"{field} must be one of: {', '.join(POLICIES)}", field)
    return value


def _rrule_dict(rule: Rule) -> dict:
    fields = rule.rrule
    return {
        "kind": "rrule",
        "rrule": fields.text,
        "dtstart": fields.dtstart.isoformat(),
        "timezone": rule.timezone,
        "exdates": [local.isoformat() for local in fields.exdates],
        "rdates": [local.isoformat() for local in fields.rdates],
    }


def _parse_hash_key(value: object, field: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_HASH_KEY_LENGTH or not value.isprintable():
        raise InvalidRecurrence(f"{field} must be a printable string of 1 to {MAX_HASH_KEY_LENGTH} characters", field)
    return value


def _parse_seconds(data: dict, key: str, minimum: int) -> int:
    field = f"recurrence.{key}"
    if key not in data:
        raise InvalidRecurrence(f"{field} is required", field)
    value = data[key]
    # bool is a subclass of int, but `true` is not a number of seconds.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecurrence(f"{field} must be an integer", field)
    if not minimum <= value <= MAX_SECONDS:
        raise InvalidRecurrence(f"{field} must be between {minimum} and {MAX_SECONDS}", field)
    return value


def _parse_anchor(value: object, field: str = "recurrence.anchor") -> datetime:
    try:
        return parse_instant(value)
    except InstantOutOfRange:
        raise InvalidRecurrence(f"{field} must be between {_iso_utc(EARLIEST)} and {_iso_utc(LATEST)}",
                                field) from None
    except ValueError:
        raise InvalidRecurrence(f"{field} must be an ISO 8601 instant with a UTC offset or Z", field) from None


def _parse_timezone(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidRecurrence("recurrence.timezone must be a string", "recurrence.timezone")
    # Membership in the known set is the whole check: it rejects path tricks ("..", "/etc")
    # before ZoneInfo ever touches the filesystem.
    if value in _HOST_ZONE_NAMES or value not in _known_zones():
        shown = value if len(value) <= 64 and value.isascii() and value.isprintable() else "(given)"
        raise InvalidTimezone(f"unknown timezone {shown!r}")
    return value


@functools.cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


@functools.lru_cache(maxsize=1024)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _iso_utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------------------
# Occurrence math
# --------------------------------------------------------------------------------------


def next_after(rule: Rule, after: datetime) -> datetime | None:
    """The earliest occurrence strictly after ``after``, as an aware UTC datetime.

    For ``after_completion`` ``after`` is the previous occurrence's end. Returns None when
    the rule has no more instants (in its window), or the next one would not be renderable
    (within a day of year 1 or 9999).
    """
    found = _next_unwindowed(rule, after)
    if found is not None and rule.active_from is not None and found < rule.active_from:
        # after_completion: due when the window opens; a calendar rule: its first instant in it.
        found = (rule.active_from if rule.kind == "after_completion"
                 else _next_unwindowed(rule, rule.active_from - timedelta(microseconds=1)))
    if found is not None and rule.active_until is not None and found > rule.active_until:
        return None
    return found


def in_window(rule: Rule, instant: datetime) -> bool:
    """Whether ``instant`` lies in the rule's window (activeFrom <= instant <= activeUntil)."""
    return ((rule.active_from is None or instant >= rule.active_from)
            and (rule.active_until is None or instant <= rule.active_until))


def _next_unwindowed(rule: Rule, after: datetime) -> datetime | None:
    after = _as_utc(after)
    if rule.calendar is None:
        return _next_of_rule(rule, after)
    try:
        found = next_occurrence(lambda moment: _next_of_rule(rule, moment), rule.calendar, _zone(rule.timezone), after)
    except OverflowError:
        return None
    return found if found is not None and renderable(found) else None


def calendar_shifted_from(rule: Rule, instant: datetime) -> datetime | None:
    """The rule instant that the schedule's calendar moved to ``instant``; None: not moved."""
    if rule.calendar is None:
        return None
    try:
        return shifted_from(lambda moment: _next_of_rule(rule, moment), rule.calendar, _zone(rule.timezone), instant)
    except OverflowError:
        return None


def calendar_excluded(rule: Rule, after: datetime, until: datetime, *, limit: int,
                      moved_too: bool = False) -> list[tuple[datetime, str]]:
    """Rule instants in (after, until) its calendar excludes and does not move (``moved_too``:
    moved ones too), each with the excluding calendar's id; at most ``limit``, in the window."""
    if rule.calendar is None or rule.kind == "after_completion":
        return []
    try:
        found = excluded_between(lambda moment: _next_of_rule(rule, moment), rule.calendar, _zone(rule.timezone),
                                 _as_utc(after), _as_utc(until), limit=limit, moved_too=moved_too)
    except OverflowError:
        return []
    return [(instant, calendar_id) for instant, calendar_id in found if in_window(rule, instant)]


def _next_of_rule(rule: Rule, after: datetime) -> datetime | None:
    """The rule's own next instant, before any calendar policy."""
    try:
        if rule.kind == "cron":
            found = next_cron(compile_cron(rule.cron, rule.dialect, rule.hash_key), _zone(rule.timezone), after)
        elif rule.kind == "interval":
            found = _next_interval(rule.anchor, rule.every_seconds, after)
        elif rule.kind == "after_completion":
            found = after + timedelta(seconds=rule.delay_seconds)
        elif rule.kind == "once":
            found = rule.at if after < rule.at else None
        elif rule.kind == "rrule":
            found = next_rrule(rule.rrule, _zone(rule.timezone), after)
        elif rule.kind == "business_day":
            found = next_business_day(rule.days, rule.at_time, rule.business or CalendarSet(()),
                                      _zone(rule.timezone), after)
        else:
            raise ValueError(f"unknown recurrence kind {rule.kind!r}")
    except OverflowError:
        return None
    return found if found is not None and renderable(found) else None


def first_not_before(rule: Rule, now: datetime) -> datetime | None:
    """The first instant not before ``now``; an after_completion schedule is due at once."""
    if rule.kind == "after_completion":
        due = max(now, rule.active_from) if rule.active_from is not None else now
        return due if in_window(rule, due) else None
    return next_after(rule, now - timedelta(microseconds=1))


def preview(rule: Rule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` occurrences after ``after`` (fewer only at datetime's limit)."""
    instants: list[datetime] = []
    cursor = after
    for _ in range(count):
        instant = next_after(rule, cursor)
        if instant is None:
            break
        instants.append(instant)
        cursor = instant
    return instants


def preview_entries(rule: Rule, after: datetime, count: int, *,
                    include_excluded: bool = False) -> list[tuple[datetime, datetime | None, str | None]]:
    """The next ``count`` occurrences after ``after`` as (instant, the rule instant a calendar
    moved it from or None, None); with ``include_excluded`` the excluded rule instants are
    listed among them as (instant, None, the excluding calendar's id)."""
    entries: list[tuple[datetime, datetime | None, str | None]] = []
    cursor = _as_utc(after)
    while len(entries) < count:
        instant = next_after(rule, cursor)
        if include_excluded:
            until = instant if instant is not None else LATEST if cursor > LATEST - timedelta(days=366) \
                else cursor + timedelta(days=366)
            entries.extend((at, None, calendar_id) for at, calendar_id in
                           calendar_excluded(rule, cursor, until, limit=count - len(entries), moved_too=True))
        if instant is None or len(entries) >= count:
            break
        entries.append((instant, calendar_shifted_from(rule, instant), None))
        cursor = instant
    return sorted(entries, key=lambda entry: entry[0])[:count]


def instants_between(rule: Rule, after: datetime, until: datetime, limit: int) -> list[datetime]:
    """Occurrences in ``(after, until]``, at most ``limit`` of them (misfire catch-up)."""
    if rule.kind == "after_completion":
        return []
    until = _as_utc(until)
    instants: list[datetime] = []
    cursor = after
    while len(instants) < limit:
        instant = next_after(rule, cursor)
        if instant is None or instant > until:
            break
        instants.append(instant)
        cursor = instant
    return instants


def local_rendering(rule: Rule, instant: datetime) -> str | None:
    """ISO 8601 with the offset of the rule's zone, e.g. ``2026-11-02T09:00:00-05:00``."""
    return render_local(rule.timezone, instant)


def render_local(zone_name: str, instant: datetime) -> str | None:
    """``instant`` on the wall clock of ``zone_name``; None when that cannot be shown (a zone
    this host does not know, or a wall clock beyond datetime's range). Never raises: stored
    rows are rendered with it, and no stored row may break a listing."""
    try:
        return _as_utc(instant).astimezone(_zone(zone_name)).isoformat()
    except (OverflowError, ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        return None


def _as_utc(instant: datetime) -> datetime:
    if not isinstance(instant, datetime) or instant.utcoffset() is None:
        raise ValueError("expected a timezone-aware datetime")
    return instant.astimezone(UTC)


def _next_interval(anchor: datetime, every_seconds: int, after: datetime) -> datetime:
    if after < anchor:
        return anchor
    # Integer microseconds keep the arithmetic exact for any anchor/after pair.
    elapsed = (after - anchor) // timedelta(microseconds=1)
    steps = elapsed // (every_seconds * 1_000_000) + 1
    return anchor + timedelta(seconds=every_seconds * steps)
