"""Schedules: a searchable keyset-paged list and a schedule's page (run history timeline,
revisions) with pause, resume and run-now through the API's services."""

from django.db.models import Q
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console import filters
from console.access import act, staff_only
from console.svg import run_timeline
from console.words import rule_in_words
from runs.authority import run_once, schedule_resume
from runs.selectors import history_watermark, runs_page
from schedules import recurrence
from schedules.models import Schedule, Tenant
from schedules.services import schedule_pause
from scheduler_project.clock import authority_now, instant

PREVIEW = 5
HISTORY = 30


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
    now = authority_now()
    context = {
        "rows": [_row(schedule, now) for schedule in page],
        "next": page[-1].id if more else "",
        "tenants": Tenant.objects.order_by("name").values_list("id", "name"),
        "filters": {"q": query, "tenant": tenant, "paused": paused},
    }
    return render(request, "console/schedules.html", context)


def _row(schedule: Schedule, now) -> dict:
    zone = (schedule.recurrence or {}).get("timezone") or "UTC"
    return {"schedule": schedule, "words": rule_in_words(schedule.recurrence), "zone": zone,
            "instants": _next_instants(schedule, now)}


def _next_instants(schedule: Schedule, now) -> list[tuple[str, str]]:
    """(local, UTC) of the next five instants; none while paused or deleted."""
    if schedule.next_run_at is None:
        return []
    try:
        rule = recurrence.parse_rule(schedule.recurrence, anchor_required=False).anchored(schedule.next_run_at)
    except (recurrence.RecurrenceError, TypeError, ValueError):
        return []
    instants = [schedule.next_run_at, *recurrence.preview(rule, schedule.next_run_at, PREVIEW - 1)]
    return [(recurrence.render_local(rule.timezone, at) or "-", instant(at)) for at in instants]


@staff_only
def schedule_detail(request, schedule_id):
    schedule = get_object_or_404(Schedule.objects.select_related("tenant", "job_type"), id=schedule_id)
    before = filters.keyset(request.GET, "before")
    runs = runs_page(schedule=schedule, upper_bound=history_watermark(), after=before, limit=HISTORY)
    context = {
        "schedule": schedule,
        "row": _row(schedule, authority_now()),
        "runs": runs,
        "timeline": run_timeline(list(reversed(runs))),
        "next": filters.keyset_value(runs[-1].scheduled_at, runs[-1].id) if len(runs) == HISTORY else "",
        "revisions": schedule.revisions.order_by("-revision")[:20],
    }
    return render(request, "console/schedule.html", context)


@require_POST
@staff_only
def schedule_action(request, schedule_id, verb):
    schedule = get_object_or_404(Schedule, id=schedule_id)
    back = reverse("console:schedule", args=[schedule.id])
    operations = {
        "pause": (lambda: schedule_pause(tenant=schedule.tenant, schedule_id=schedule.id), "Paused"),
        "resume": (lambda: schedule_resume(tenant=schedule.tenant, schedule_id=schedule.id), "Resumed"),
        "run-now": (lambda: run_once(tenant=schedule.tenant, schedule_id=schedule.id), "Run queued"),
    }
    if verb not in operations:
        return render(request, "console/bad_request.html", {"message": "unknown action"}, status=400)
    operation, done = operations[verb]
    return act(request, operation, f"{done}: {schedule.name}", back)
