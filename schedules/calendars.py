"""Calendars: a tenant's excluded dates, revisioned like schedules, and what reads them:
the fields' validation, the reads (`calendar_days_for` reads a set of calendars in one
query, the scanner's once per pass), a schedule's rule under its calendars, the .ics
parsing. The writes are schedule services (schedule_services.calendars).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Count, Q

from kernel.errors import InvalidRequest, NotFound
from schedules import recurrence
from schedules.models import Calendar, CalendarRevision, MAX_CALENDAR_DATES, Schedule, ScheduleCalendar, Tenant
from schedules.recurrence.calendars import CalendarDays

MAX_ANNUAL_DATES = 366
MAX_ICS_BYTES = 1024 * 1024  # also the request body limit (DATA_UPLOAD_MAX_MEMORY_SIZE)
ICS_EXPANSION_YEARS = 10
ICS_EXPANSION_BUDGET = 100_000  # event days (and RRULE instants) one import may expand, repeats included
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_ANNUAL = re.compile(r"([0-9]{2})-([0-9]{2})", re.ASCII)


# --------------------------------------------------------------------------------------
# Validation of the calendar's fields (the request edge calls these)
# --------------------------------------------------------------------------------------


def parse_dates(value: object, field: str = "excludeDates") -> list[str]:
    if not isinstance(value, list):
        raise InvalidRequest(f"{field} must be a list of dates YYYY-MM-DD", field=field)
    if len(value) > MAX_CALENDAR_DATES:
        raise InvalidRequest(f"{field} holds at most {MAX_CALENDAR_DATES} dates", field=field)
    days = set()
    for item in value:
        if not isinstance(item, str) or not _DATE.fullmatch(item):
            raise InvalidRequest(f"{field}: each is a date YYYY-MM-DD", field=field)
        try:
            days.add(date.fromisoformat(item))
        except ValueError:
            raise InvalidRequest(f"{field}: {item!r} is not a date", field=field) from None
    return [day.isoformat() for day in sorted(days)]


def parse_annual(value: object, field: str = "excludeAnnual") -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ANNUAL_DATES:
        raise InvalidRequest(f"{field} must be a list of at most {MAX_ANNUAL_DATES} dates MM-DD", field=field)
    days = set()
    for item in value:
        match = _ANNUAL.fullmatch(item) if isinstance(item, str) else None
        if match is None:
            raise InvalidRequest(f"{field}: each is a date MM-DD", field=field)
        try:
            date(2000, int(match[1]), int(match[2]))  # a leap year: 02-29 is a date
        except ValueError:
            raise InvalidRequest(f"{field}: {item!r} is not a date", field=field) from None
        days.add(item)
    return sorted(days)


def parse_weekdays(value: object, field: str = "excludeWeekdays") -> list[int]:
    if not isinstance(value, list) or len(value) > 7 or any(
            isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 7 for day in value):
        raise InvalidRequest(f"{field} must be a list of ISO weekdays 1 (Monday) to 7", field=field)
    return sorted(set(value))


def parse_timezone(value: object) -> str:
    try:
        return recurrence.parse_rule({"kind": "once", "at": "2000-01-01T00:00:00Z", "timezone": value}).timezone
    except recurrence.RecurrenceError as exc:
        raise InvalidRequest(exc.message.replace("recurrence.", ""), field="timezone") from None


def parse_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200 or not value.isprintable():
        raise InvalidRequest("name must be one printable line of 1 to 200 characters", field="name")
    return value


def calendar_fields(body: dict, *, partial: bool) -> dict:
    """The model fields the request body gives, each checked; unknown keys are refused."""
    known = {"name", "timezone", "excludeDates", "excludeAnnual", "excludeWeekdays"}
    if partial:
        known = known | {"expectedRevision"}
    for key in body:
        if key not in known:
            raise InvalidRequest(f"unknown field {str(key)[:100]!r}", field=str(key)[:100])
    if not partial and "name" not in body:
        raise InvalidRequest("name is required", field="name")
    parsers = {"name": ("name", parse_name), "timezone": ("timezone", parse_timezone),
               "excludeDates": ("exclude_dates", parse_dates), "excludeAnnual": ("exclude_annual", parse_annual),
               "excludeWeekdays": ("exclude_weekdays", parse_weekdays)}
    return {parsers[key][0]: parsers[key][1](value) for key, value in body.items() if key in parsers}


# --------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------


_LIVE_USERS = Count("schedule_rows", filter=Q(schedule_rows__schedule__deleted_at__isnull=True))


def calendar_get(*, tenant: Tenant, calendar_id: str) -> Calendar:
    calendar = Calendar.objects.filter(id=calendar_id, tenant=tenant).annotate(live_schedules=_LIVE_USERS).first()
    if calendar is None:
        raise NotFound("no such calendar")
    return calendar


def calendars_list(*, tenant: Tenant, after_id: str | None, limit: int) -> list[Calendar]:
    calendars = Calendar.objects.filter(tenant=tenant).annotate(live_schedules=_LIVE_USERS).order_by("id")
    if after_id:
        calendars = calendars.filter(id__gt=after_id)
    return list(calendars[:limit])


def calendar_revisions(*, calendar: Calendar, limit: int = 100) -> list[dict]:
    """The calendar's revisions, newest first: what each set, who wrote it and when."""
    return [{"revision": revision.revision, "createdAt": revision.created_at.isoformat().replace("+00:00", "Z"),
             "authorKind": revision.author_kind, **revision.payload}
            for revision in CalendarRevision.objects.filter(calendar=calendar).order_by("-revision")[:limit]]


def calendar_representation(calendar: Calendar) -> dict:
    return {
        "calendarId": calendar.id,
        "name": calendar.name,
        "timezone": calendar.timezone,
        "excludeDates": calendar.exclude_dates,
        "excludeAnnual": calendar.exclude_annual,
        "excludeWeekdays": calendar.exclude_weekdays,
        "revision": calendar.revision,
        "schedules": _live_users(calendar),
        "createdAt": calendar.created_at.isoformat().replace("+00:00", "Z"),
        "updatedAt": calendar.updated_at.isoformat().replace("+00:00", "Z"),
    }


def _live_users(calendar: Calendar) -> int:
    """Live schedules using the calendar (as annotated by the selectors, else counted)."""
    counted = getattr(calendar, "live_schedules", None)
    if counted is not None:
        return counted
    return ScheduleCalendar.objects.filter(calendar=calendar, schedule__deleted_at__isnull=True).count()


def calendar_days(calendar: Calendar) -> CalendarDays:
    """The calendar's exclusions for the recurrence math."""
    return CalendarDays(
        calendar.id, ZoneInfo(calendar.timezone),
        frozenset(date.fromisoformat(day) for day in calendar.exclude_dates),
        frozenset((int(day[:2]), int(day[3:])) for day in calendar.exclude_annual),
        frozenset(calendar.exclude_weekdays),
    )


def calendar_days_for(ids, *, tenant_id: str | None = None, lock: bool = False) -> dict[str, CalendarDays]:
    """id -> exclusions of the calendars ``ids`` (of ``tenant_id`` when given): one query.
    ``lock`` (in a schedule write's transaction): the rows are held until it commits, so a
    calendar edit either commits first (and is read here) or waits, and then finds the
    schedule among its users when it recomputes them."""
    calendars = Calendar.objects.filter(id__in=set(ids))
    if tenant_id is not None:
        calendars = calendars.filter(tenant_id=tenant_id)
    if lock:
        calendars = calendars.select_for_update(no_key=True).order_by("id")
    return {calendar.id: calendar_days(calendar) for calendar in calendars}


def rule_bound(rule: recurrence.Rule, tenant_id: str, *, strict: bool = False) -> recurrence.Rule:
    """``rule`` with the exclusions of the calendars it names; ``strict`` (a request naming
    them): a policy the rule cannot take is 400, a calendar that is not the tenant's 404;
    else (a stored row) a missing calendar is left out."""
    if strict:
        try:
            recurrence.check_calendar_policy(rule)
        except recurrence.RecurrenceError as exc:
            raise InvalidRequest(exc.message, field=exc.field) from None
    refs = rule.calendar_refs()
    if not refs:
        return rule
    in_write = strict and transaction.get_connection().in_atomic_block
    found = calendar_days_for(refs, tenant_id=tenant_id, lock=in_write)
    if strict and len(found) != len(refs):
        missing = sorted(refs - set(found))[0]
        raise NotFound(f"no such calendar {missing[:40]!r}", details={"calendarId": missing[:40]})
    return rule.bound(found)


def schedule_calendar_rule(rule: recurrence.Rule, calendar: dict | None) -> recurrence.Rule:
    """``rule`` under a schedule's stored ``calendar`` field (None: none), not yet bound."""
    if not calendar:
        return rule
    return rule.calendared(calendar.get("calendarIds") or (), calendar.get("policy") or "skip")


def parse_schedule_calendar(value: object, kind: str | None = None) -> dict | None:
    """The schedule field `calendar` ({"calendarIds", "policy"}) checked; null: none."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest("calendar must be an object with calendarIds and policy", field="calendar")
    for key in value:
        if key not in ("calendarIds", "policy"):
            raise InvalidRequest(f"unknown key {str(key)[:100]!r} of calendar", field=f"calendar.{str(key)[:100]}")
    try:
        ids = recurrence.parse_calendar_ids(value.get("calendarIds"), "calendar.calendarIds")
        policy = recurrence.parse_calendar_policy(value.get("policy", "skip"))
    except recurrence.RecurrenceError as exc:
        raise InvalidRequest(exc.message, field=exc.field) from None
    if not ids:
        return None
    if kind == "after_completion":
        raise InvalidRequest("calendar does not apply to an after_completion recurrence", field="calendar")
    return {"calendarIds": list(ids), "policy": policy}


def index_schedule_calendars(schedule: Schedule, rule: recurrence.Rule) -> None:
    """The ScheduleCalendar rows of the schedule's calendars, in the caller's transaction."""
    ScheduleCalendar.objects.filter(schedule=schedule).delete()
    ScheduleCalendar.objects.bulk_create(
        [ScheduleCalendar(schedule=schedule, calendar_id=calendar_id) for calendar_id in sorted(rule.calendar_refs())])


# --------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------


def stored_rule(schedule) -> recurrence.Rule | None:
    """A schedule's stored rule in its window under its calendar field, not yet bound."""
    try:
        rule = recurrence.parse_rule(schedule.recurrence, default_anchor=getattr(schedule, "created_at", None))
    except recurrence.RecurrenceError:
        return None
    return schedule_calendar_rule(rule, schedule.calendar).within(schedule.active_from, schedule.active_until)


# --------------------------------------------------------------------------------------
# .ics import
# --------------------------------------------------------------------------------------


def ics_dates(text: bytes) -> set[date]:
    """The dates of the all-day VEVENTs of an iCalendar text (RRULE'd events expanded for
    ICS_EXPANSION_YEARS from their start, EXDATEs left out); 400 on anything malformed."""
    import icalendar
    from dateutil.rrule import rrulestr

    if len(text) > MAX_ICS_BYTES:
        raise InvalidRequest(f"the .ics body holds at most {MAX_ICS_BYTES} bytes", field="body")
    try:
        parsed = icalendar.Calendar.from_ical(text)
    except Exception as exc:  # icalendar raises ValueError, KeyError, IndexError on malformed text
        raise InvalidRequest(f"not an iCalendar text: {str(exc)[:200]}", field="body") from None
    found: set[date] = set()
    budget = ICS_EXPANSION_BUDGET
    try:
        for event in parsed.walk("VEVENT"):
            start = event.get("DTSTART")
            if start is None:
                continue
            first = start.dt
            if isinstance(first, datetime) or not isinstance(first, date):
                continue  # a timed event: not a day off
            end = event.get("DTEND")
            length = max(1, (end.dt - first).days) if end is not None and not isinstance(end.dt, datetime) else 1
            starts = [first]
            rule = event.get("RRULE")
            if rule is not None:
                text_rule = rule.to_ical().decode()
                until = datetime.combine(first, datetime.min.time()) + timedelta(days=366 * ICS_EXPANSION_YEARS)
                expanded = rrulestr(text_rule, dtstart=datetime.combine(first, datetime.min.time()), forceset=True)
                starts = []
                for moment in expanded:  # lazily: a SECONDLY rule is cut by the budget, not listed
                    if moment > until:
                        break
                    budget = _spend(budget)
                    starts.append(moment.date())
            excluded = set()
            for exdate in _as_list(event.get("EXDATE")):
                excluded |= {item.dt if not isinstance(item.dt, datetime) else item.dt.date() for item in exdate.dts}
            for begin in starts:
                if begin in excluded:
                    continue
                for offset in range(min(length, 366)):
                    budget = _spend(budget)
                    found.add(begin + timedelta(days=offset))
                if len(found) > MAX_CALENDAR_DATES:
                    raise InvalidRequest(f"the .ics text gives more than {MAX_CALENDAR_DATES} dates", field="body")
    except InvalidRequest:
        raise
    except Exception as exc:  # a malformed property surfaces only when read
        raise InvalidRequest(f"malformed event in the .ics text: {str(exc)[:200]}", field="body") from None
    return found


def _spend(budget: int) -> int:
    if budget <= 0:
        raise InvalidRequest(f"the .ics events expand to more than {ICS_EXPANSION_BUDGET} days", field="body")
    return budget - 1


def _as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
