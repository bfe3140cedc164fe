"""Schedules: a searchable keyset-paged list and a schedule's page (its recent and coming
occurrences on one time axis, the history, revisions) with pause, resume and run-now
through the API's services."""

from django.db.models import F, Q
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console import filters
from console.access import act, staff_only
from console.timeline import INCIDENT_STYLES, counts, marks, occurrence_axis, spans
from console.words import rule_in_words, rule_syntax, zone_of
from datetime import timedelta

from kernel.clock import authority_now
from runs.authority import run_once, schedule_resume
from runs.models import PendingReason, Run, RunState
from runs.selectors import history_watermark, runs_page
from schedule_services.directives import directive_delete, directive_put, occurrences_between, orphaned_directives
from schedule_services.lifecycle import schedule_pause
from scheduler_project.http.occurrences import DirectiveSerializer, path_instant
from scheduler_project.http.validation import validate_body
from schedules import recurrence
from schedules.audit import staff_actor
from schedules.calendars import rule_bound, schedule_calendar_rule
from schedules.models import Calendar, Schedule, Tenant
from schedules.selectors import schedule_ended

PREVIEW = 5  # next instants in the list
COMING = 10  # next instants on a schedule's time axis
HISTORY = 30
AUDIT = 10  # the schedule's latest audit entries
OCCURRENCE_SPAN = timedelta(days=366)  # the coming occurrences listed with their directives: the next COMING in it
DIRECTIVE_VERBS = {"skip": "Skipped", "hold": "Held", "note": "Noted", "clear": "Directive removed"}
INCIDENTS = 10  # its health incidents shown


@staff_only
def schedule_list(request):
    query = filters.text(request.GET, "q")
    tenant = filters.identifier(request.GET, "tenant")
    paused = filters.choice(request.GET, "paused", ("yes", "no"))
    after = filters.identifier(request.GET, "after")
    schedules = Schedule.objects.filter(deleted_at__isnull=True).select_related("tenant")
    if tenant:
        schedules = schedules.filter(tenant_id=tenant)
    if paused:
        schedules = schedules.filter(paused=paused == "yes")
    if query:
        schedules = schedules.filter(
            Q(name__icontains=query) | Q(id=query) | Q(job_type__name__icontains=query) | Q(tenant__name__icontains=query)
        )
    if after:
        schedules = schedules.filter(id__gt=after)
    page = list(schedules.order_by("id")[: filters.PAGE_SIZE + 1])
    more = len(page) > filters.PAGE_SIZE
    page = page[: filters.PAGE_SIZE]
    names = calendar_names_of(page)
    context = {
        "rows": [_row(schedule, names=names) for schedule in page],
        "next": page[-1].id if more else "",
        "tenants": Tenant.objects.order_by("name").values_list("id", "name"),
        "filters": {"q": query, "tenant": tenant, "paused": paused},
    }
    return render(request, "console/schedules.html", context)


def _row(schedule: Schedule, count: int = PREVIEW, names: dict | None = None) -> dict:
    if names is None:
        names = calendar_names_of([schedule])
    return {"schedule": schedule, "words": rule_in_words(schedule.recurrence, schedule.calendar, names),
            "syntax": rule_syntax(schedule.recurrence), "zone": zone_of(schedule.recurrence),
            "instants": _next_instants(schedule, count), "ended": schedule_ended(schedule, now=authority_now)}


def _coming_rule(schedule: Schedule) -> recurrence.Rule | None:
    """The rule the scanner reads (window, calendars) of a running schedule; None while paused,
    deleted or ended, or for a row stored under older, looser rules."""
    if schedule.next_run_at is None:
        return None
    try:
        rule = recurrence.parse_rule(schedule.recurrence, anchor_required=False).anchored(schedule.next_run_at).within(
            schedule.active_from, schedule.active_until)
    except (recurrence.RecurrenceError, TypeError, ValueError):
        return None
    rule = schedule_calendar_rule(rule, schedule.calendar)
    return rule_bound(rule, schedule.tenant_id) if rule.calendar_refs() else rule


def _next_instants(schedule: Schedule, count: int) -> list:
    """The next `count` instants (UTC datetimes); none while paused or deleted."""
    rule = _coming_rule(schedule)
    if rule is None:
        return []
    return [schedule.next_run_at, *recurrence.preview(rule, schedule.next_run_at, count - 1)]


def _preview(schedule: Schedule, count: int, names: dict) -> list[dict]:
    """The next `count` instants as the API's preview with includeExcluded shows them: each
    occurrence with the instant its calendar moved it from, and among them the rule instants
    a calendar excludes, with the calendar's name."""
    rule = _coming_rule(schedule)
    if rule is None:
        return []
    if rule.calendar is None:
        return [{"at": at} for at in _next_instants(schedule, count)]
    # From where the schedule's materialization stopped: an instant excluded since is listed too.
    start = schedule.next_run_at - timedelta(microseconds=1)
    if schedule.next_run_from is not None and schedule.next_run_from < start:
        start = schedule.next_run_from
    entries = [(at, moved, excluded) for at, moved, excluded in
               recurrence.preview_entries(rule, start, 2 * count, include_excluded=True)
               if excluded or at >= schedule.next_run_at]
    return [{"at": at, "moved_from": moved, "excluded": names.get(excluded, excluded) if excluded else None}
            for at, moved, excluded in entries[:count]]


@staff_only
def schedule_detail(request, schedule_id):
    schedule = get_object_or_404(Schedule.objects.select_related("tenant", "job_type"), id=schedule_id)
    before = filters.keyset(request.GET, "before")
    runs = runs_page(schedule_id=schedule.id, upper_bound=history_watermark(), after=before, limit=HISTORY, shown=None)
    now = authority_now()
    row = _row(schedule, COMING)
    # The axis shows the newest runs with what comes next; an older page shows its runs alone.
    found = marks(runs, row["instants"] if before is None else [], row["zone"], now)
    # Open ones first, then the latest resolved: which occurrence, since when, until when.
    incidents = list(schedule.incidents.order_by(F("resolved_at").desc(nulls_first=True), "-opened_at")[:INCIDENTS])
    drawn = spans(incidents, row["zone"])
    context = {
        "schedule": schedule,
        "row": row,
        "preview": _preview(schedule, PREVIEW, calendar_names_of([schedule])),
        "runs": runs,
        "axis": occurrence_axis(found, row["zone"], now, drawn),
        "legend": counts(found),
        "incident_legend": [(kind, *INCIDENT_STYLES[kind]) for kind in INCIDENT_STYLES
                            if any(span.kind == kind for span in drawn)],
        "next": filters.keyset_value(runs[-1].scheduled_at, runs[-1].id) if len(runs) == HISTORY else "",
        "revisions": [_revision(revision) for revision in schedule.revisions.order_by("-revision")[:20]],
        "audit": schedule.audit_entries.order_by("-id")[:AUDIT],
        "occurrences": occurrences_between(schedule, now, now + OCCURRENCE_SPAN, COMING)
        if schedule.deleted_at is None else [],
        "orphaned": orphaned_directives(schedule),
        "held": Run.objects.filter(schedule=schedule, state=RunState.PENDING, pending_reason=PendingReason.HELD)
        .order_by("scheduled_at")[:COMING],
        "incidents": incidents,
    }
    return render(request, "console/schedule.html", context)


def calendar_names_of(schedules) -> dict:
    """Calendar id -> name for the calendars the schedules' rules and calendar fields name: one query."""
    ids = set()
    for schedule in schedules:
        ids.update((schedule.calendar or {}).get("calendarIds") or ())
        if isinstance(schedule.recurrence, dict):
            ids.update(schedule.recurrence.get("calendarIds") or ())
    return dict(Calendar.objects.filter(id__in=ids).values_list("id", "name")) if ids else {}


def _revision(revision) -> dict:
    rule = revision.payload.get("recurrence") if isinstance(revision.payload, dict) else None
    calendar = revision.payload.get("calendar") if isinstance(revision.payload, dict) else None
    return {"revision": revision, "words": rule_in_words(rule, calendar, calendar_names_of([revision.schedule])),
            "syntax": rule_syntax(rule), "zone": zone_of(rule)}


@require_POST
@staff_only
def schedule_action(request, schedule_id, verb):
    schedule = get_object_or_404(Schedule, id=schedule_id)
    back = reverse("console:schedule", args=[schedule.id])
    actor = staff_actor(request.user)
    operations = {
        "pause": (lambda: schedule_pause(tenant=schedule.tenant, schedule_id=schedule.id, actor=actor), "Paused"),
        "resume": (lambda: schedule_resume(tenant=schedule.tenant, schedule_id=schedule.id, actor=actor), "Resumed"),
        "run-now": (lambda: run_once(tenant=schedule.tenant, schedule_id=schedule.id), "Run queued"),
    }
    if verb not in operations:
        return render(request, "console/bad_request.html", {"message": "unknown action"}, status=400)
    operation, done = operations[verb]
    return act(request, operation, f"{done}: {schedule.name}", back)


@require_POST
@staff_only
def occurrence_action(request, schedule_id, verb):
    """Skip, hold or annotate one coming occurrence (``at`` posted), or remove its directive
    (``clear``): the API's services and checks, recorded with the staff user's name."""
    schedule = get_object_or_404(Schedule, id=schedule_id)
    if verb not in DIRECTIVE_VERBS:
        return render(request, "console/bad_request.html", {"message": "unknown action"}, status=400)
    actor = staff_actor(request.user)

    def operation():
        at = path_instant(request.POST.get("at", ""))
        if verb == "clear":
            return directive_delete(tenant=schedule.tenant, schedule_id=schedule.id, at=at, actor=actor)
        body = validate_body(DirectiveSerializer, {"action": verb, "note": request.POST.get("note", "")})
        directive_put(tenant=schedule.tenant, schedule_id=schedule.id, at=at, action=verb, note=body.get("note", ""),
                      actor=actor)

    return act(request, operation, f"{DIRECTIVE_VERBS[verb]}: {request.POST.get('at', '')[:40]}",
               reverse("console:schedule", args=[schedule.id]))

