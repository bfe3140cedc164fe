"""Runs: a tenant's runs (keyset pages of the tenant history index) and a run's page:
attempts, fences, leases, cancellation, replay, the canonical result and each effect's state."""

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console import filters
from console.access import act, staff_only
from runs.authority import run_cancel, run_release, run_replay
from runs.models import Run, RunState
from runs.results import result_download
from runs.selectors import history_watermark, tenant_runs_page, with_concurrency_key, with_schedule
from schedules.audit import staff_actor
from schedules.models import Tenant
from kernel.errors import DomainError
from scheduler_project.http.representations import run_pending_reason, run_progress_representation
from scheduler_project.http.run_requests import ReplaySerializer
from scheduler_project.http.validation import validate_body


@staff_only
def run_list(request):
    tenants = list(Tenant.objects.order_by("name").values_list("id", "name"))
    tenant_id = filters.identifier(request.GET, "tenant") or (tenants[0][0] if tenants else "")
    state = filters.choice(request.GET, "state", RunState.values)
    before = filters.keyset(request.GET, "before")
    tenant = Tenant.objects.filter(id=tenant_id).first()
    runs = []
    if tenant is not None:
        runs = tenant_runs_page(tenant=tenant, states=[state] if state else (), upper_bound=history_watermark(),
                                after=before, limit=filters.PAGE_SIZE, shown=with_schedule)
    context = {
        "runs": runs, "tenants": tenants, "states": RunState.values,
        "filters": {"tenant": tenant_id, "state": state},
        "next": filters.keyset_value(runs[-1].scheduled_at, runs[-1].id) if len(runs) == filters.PAGE_SIZE else "",
    }
    return render(request, "console/runs.html", context)


@staff_only
def run_detail(request, run_id):
    run = get_object_or_404(with_concurrency_key(Run.objects.select_related("schedule", "tenant")), id=run_id)
    progress = run_progress_representation(run)  # as the API shows it: a succeeded run reads complete
    context = {
        "run": run,
        "pending_reason": run_pending_reason(run),
        "attempts": run.attempts.order_by("number"),
        "effects": run.effect_intents.order_by("created_at", "id"),
        "progress_percent": round(progress["fraction"] * 100) if progress else None,
    }
    return render(request, "console/run.html", context)


@staff_only
def run_result(request, run_id):
    """A fresh signed link to the canonical result (pinned while it lives), then there."""
    run = get_object_or_404(Run, id=run_id)
    try:
        download = result_download(tenant=run.tenant, run_id=run.id, base_url=settings.PUBLIC_BASE_URL)
    except DomainError as refused:
        messages.error(request, refused.message)
        return redirect(reverse("console:run", args=[run.id]))
    return redirect(download["url"])


@require_POST
@staff_only
def run_cancel_view(request, run_id):
    run = get_object_or_404(Run, id=run_id)
    return act(request, lambda: run_cancel(tenant=run.tenant, run_id=run.id), "Cancellation requested",
               reverse("console:run", args=[run.id]))


@require_POST
@staff_only
def run_release_view(request, run_id):
    """A held run (a hold directive) is released, back to its schedule's page."""
    run = get_object_or_404(Run, id=run_id)
    return act(request, lambda: run_release(tenant=run.tenant, run_id=run.id, actor=staff_actor(request.user)),
               "Released", reverse("console:schedule", args=[run.schedule_id]))


@require_POST
@staff_only
def run_replay_view(request, run_id):
    """A failed run runs again (the API's replay), recorded with the staff user's name; the
    note is checked as the API checks it."""
    run = get_object_or_404(Run, id=run_id)

    def replay():
        body = validate_body(ReplaySerializer, {"note": request.POST.get("note", "")})
        run_replay(tenant=run.tenant, run_id=run.id, note=body["note"], actor=request.user.get_username())

    return act(request, replay, "Replayed: a new attempt is queued", reverse("console:run", args=[run.id]))
