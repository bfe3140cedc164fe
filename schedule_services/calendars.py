"""Calendar writes (`calendar_create`, `calendar_update`, `calendar_import`, `calendar_delete`),
one transaction each; an edit then recomputes `next_run_at` of the schedules that use the
calendar in bounded transactions (`CALENDAR_RECOMPUTE_BATCH` schedules each), from where each
schedule's materialization stopped: nothing already materialized changes, and the directives
of coming instants follow as after a schedule edit."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Q

from kernel.clock import authority_now
from kernel.errors import InvalidState, NotFound, RevisionConflict
from schedule_services.directives import reconcile_directives
from schedules import recurrence
from schedules.calendars import calendar_days_for, calendar_representation, ics_dates, parse_dates, stored_rule
from schedules.models import (
    AuthorKind, Calendar, CalendarRevision, OccurrenceDirective, Schedule, ScheduleCalendar, Tenant,
)
from schedules.selectors import occurrences_left

CALENDAR_RECOMPUTE_BATCH = 200  # schedules recomputed per transaction after a calendar edit


def _payload(calendar: Calendar) -> dict:
    return {"name": calendar.name, "timezone": calendar.timezone, "excludeDates": calendar.exclude_dates,
            "excludeAnnual": calendar.exclude_annual, "excludeWeekdays": calendar.exclude_weekdays}


def calendar_create(*, tenant: Tenant, fields: dict, author_kind: str = AuthorKind.API) -> Calendar:
    with transaction.atomic(durable=True):
        calendar = Calendar(tenant=tenant, **fields)
        calendar.save(force_insert=True)
        CalendarRevision.objects.create(calendar=calendar, revision=1, payload=_payload(calendar),
                                        author_kind=author_kind)
    return calendar


def calendar_update(*, tenant: Tenant, calendar_id: str, expected_revision: int, fields: dict,
                    author_kind: str = AuthorKind.API) -> Calendar:
    """PATCH with expectedRevision; then the schedules using it get their next_run_at again."""
    with transaction.atomic(durable=True):
        calendar = Calendar.objects.select_for_update().filter(id=calendar_id, tenant=tenant).first()
        if calendar is None:
            raise NotFound("no such calendar")
        if expected_revision != calendar.revision:
            error = RevisionConflict(f"expectedRevision {expected_revision} is not current; the calendar is at "
                                     f"revision {calendar.revision}")
            error.current = calendar_representation(calendar)
            raise error
        _revise(calendar, fields, author_kind)
    calendar_recompute_schedules(calendar.id)
    return calendar


def calendar_import(*, tenant: Tenant, calendar_id: str, text: bytes, author_kind: str = AuthorKind.API) -> Calendar:
    """Adds the dates of the .ics text's all-day events (a new revision)."""
    added = ics_dates(text)
    with transaction.atomic(durable=True):
        calendar = Calendar.objects.select_for_update().filter(id=calendar_id, tenant=tenant).first()
        if calendar is None:
            raise NotFound("no such calendar")
        dates = parse_dates(calendar.exclude_dates + [day.isoformat() for day in added], field="body")
        _revise(calendar, {"exclude_dates": dates}, author_kind)
    calendar_recompute_schedules(calendar.id)
    return calendar


def _revise(calendar: Calendar, fields: dict, author_kind: str) -> None:
    for name, value in fields.items():
        setattr(calendar, name, value)
    calendar.revision += 1
    calendar.save()
    CalendarRevision.objects.create(calendar=calendar, revision=calendar.revision, payload=_payload(calendar),
                                    author_kind=author_kind)


def calendar_delete(*, tenant: Tenant, calendar_id: str) -> None:
    with transaction.atomic(durable=True):
        calendar = Calendar.objects.select_for_update().filter(id=calendar_id, tenant=tenant).first()
        if calendar is None:
            raise NotFound("no such calendar")
        users = list(ScheduleCalendar.objects.filter(calendar=calendar, schedule__deleted_at__isnull=True)
                     .values_list("schedule_id", flat=True)[:10])
        if users:
            raise InvalidState("the calendar is used by schedules; remove it from them first",
                               details={"scheduleIds": users})
        ScheduleCalendar.objects.filter(calendar=calendar).delete()  # deleted schedules' rows
        calendar.delete()


def calendar_recompute_schedules(calendar_id: str, *, batch: int = CALENDAR_RECOMPUTE_BATCH) -> int:
    """next_run_at of the live, running schedules using the calendar, computed again under
    its current exclusions from where their materialization stopped (next_run_from): one
    transaction per `batch` schedules, each locked and re-read. Returns how many changed.
    The directives of coming instants follow as after a schedule edit: orphaned when the
    calendar now skips or moves their instant, adopted back when it is produced again."""
    changed, after_id = 0, ""
    while True:
        ids = list(ScheduleCalendar.objects.filter(calendar_id=calendar_id, schedule_id__gt=after_id)
                   .order_by("schedule_id").values_list("schedule_id", flat=True)[:batch])
        if not ids:
            return changed
        after_id = ids[-1]
        with transaction.atomic(durable=True):
            now = authority_now()
            directed = set(OccurrenceDirective.objects.filter(schedule_id__in=ids, instant__gt=now)
                           .values_list("schedule_id", flat=True).distinct())
            # A schedule whose every instant was excluded has no next_run_at; an edit may give it
            # one. A paused one is locked only for its directives.
            schedules = list(Schedule.objects.select_for_update(of=("self",)).filter(
                Q(paused=False) | Q(id__in=directed), id__in=ids, deleted_at__isnull=True).order_by("id"))
            for schedule in schedules:
                if schedule.id in directed:
                    reconcile_directives(schedule, now)
            schedules = [schedule for schedule in schedules if not schedule.paused]
            refs = set()
            rules = {}
            for schedule in schedules:
                rule = stored_rule(schedule)
                if rule is not None:
                    rules[schedule.id] = rule
                    refs |= rule.calendar_refs()
            days = calendar_days_for(refs)
            for schedule in schedules:
                rule = rules.get(schedule.id)
                if rule is None or rule.kind == "after_completion" or occurrences_left(schedule) == 0:
                    continue
                if schedule.next_run_from is None and schedule.next_run_at is None:
                    continue  # ended before it knew where from; an edit of the schedule revives it
                start = schedule.next_run_from or (schedule.next_run_at - timedelta(microseconds=1))
                following = recurrence.next_after(rule.bound(days), start)
                if following != schedule.next_run_at:
                    Schedule.objects.filter(id=schedule.id).update(next_run_at=following)
                    changed += 1
