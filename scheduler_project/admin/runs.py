"""Operator views of runs: read-only; the actions (cancel, release a held run) go through the authority."""

from django.contrib import admin

from runs.authority import run_cancel, run_release
from runs.models import Attempt, Incident, Outbox, Run, StoredObject
from scheduler_project.admin.forms import schedule_zone, zoned
from scheduler_project.admin.schedules import ReadOnlyAdmin, apply_to_each
from scheduler_project.http.representations import run_progress_representation
from schedules.audit import staff_actor


class AttemptInline(admin.TabularInline):
    model = Attempt
    fk_name = "run"
    extra = 0
    can_delete = False
    fields = ("id", "number", "fence", "state", "reason", "worker_label", "started_at", "deadline_at", "lease_expires_at",
              "finished_at", "error")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "schedule", "state", "progress", "attempt_count", "scheduled_at", "scheduled_local",
                    "due_at", "finished_at")
    readonly_fields = ("progress",)
    list_filter = ("state", "pending_reason", "trigger", "job_type")
    search_fields = ("id", "schedule__id", "schedule__name")
    list_select_related = ("schedule",)
    date_hierarchy = "scheduled_at"
    inlines = [AttemptInline]
    actions = ["cancel", "release"]

    @admin.display(description="scheduled, in the schedule's zone", ordering="scheduled_at")
    def scheduled_local(self, run):
        return zoned(run.scheduled_at, schedule_zone(run.schedule))

    @admin.display(description="progress")
    def progress(self, run):
        """The latest attempt's last ctx.progress(), as GET /runs/{id} shows it."""
        shown = run_progress_representation(run)
        if shown is None:
            return "-"
        return f"{shown['fraction']:.0%} {shown['message']} (at {shown['updatedAt']})".replace("  ", " ")

    @admin.action(description="Cancel selected runs")
    def cancel(self, request, queryset):
        apply_to_each(self, request, queryset, lambda run: run_cancel(tenant=run.tenant, run_id=run.id), "Canceled")

    @admin.action(description="Release selected held runs")
    def release(self, request, queryset):
        actor = staff_actor(request.user)
        apply_to_each(self, request, queryset,
                      lambda run: run_release(tenant=run.tenant, run_id=run.id, actor=actor), "Released")


@admin.register(Outbox)
class OutboxAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "action_key", "run", "created_at", "published_at", "processed_at", "publish_attempts")
    list_filter = ("kind",)
    search_fields = ("action_key", "run__id")


@admin.register(StoredObject)
class StoredObjectAdmin(ReadOnlyAdmin):
    list_display = ("key", "version_id", "run", "fence", "state", "checksum", "size", "created_at")
    list_filter = ("state",)
    search_fields = ("key", "run__id")


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    """Schedule health incidents, as the health evaluation opened and resolved them."""

    list_display = ("id", "schedule", "kind", "run_id", "instant", "opened_at", "resolved_at", "resolution")
    list_filter = ("kind", "resolution")
    search_fields = ("id", "schedule__id", "schedule__name")
    list_select_related = ("schedule",)
    date_hierarchy = "opened_at"
