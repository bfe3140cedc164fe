"""Operator views. Schedules are changed only through the services (revisioned, locked),
so their admin is read-only apart from the pause/resume/run-now actions."""

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html_join

from runs.authority import run_once, schedule_resume
from schedules.models import ApiToken, JobType, Schedule, Tenant
from schedules.recurrence import RecurrenceError, local_rendering, parse_rule, preview
from schedules.services import schedule_pause
from schedules.tenants import token_revoke
from scheduler_project.errors import DomainError


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: state changes go through services (admin actions), never a model form."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def apply_to_each(modeladmin, request, queryset, operation, verb):
    """Run `operation` per object, reporting successes and domain errors to the operator."""
    done = 0
    for obj in queryset:
        try:
            operation(obj)
            done += 1
        except DomainError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.message}", level=messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{verb} {done} item(s).", level=messages.SUCCESS)


@admin.register(JobType)
class JobTypeAdmin(admin.ModelAdmin):
    list_display = ("name", "resource_class", "default_lease_seconds", "max_attempts", "enabled")
    list_filter = ("resource_class", "enabled")
    readonly_fields = ("name", "params_schema", "params_schema_version")

    def get_readonly_fields(self, request, obj=None):
        # A new type needs its name; an existing one keeps its identity and schema.
        return () if obj is None else self.readonly_fields


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("name", "id", "max_schedules", "max_active_runs", "max_emails_per_day", "weight", "created_at")
    search_fields = ("name", "id")
    readonly_fields = ("id", "created_at")
    filter_horizontal = ("allowed_job_types",)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "name", "tenant", "created_at", "revoked_at")
    list_filter = ("kind",)
    search_fields = ("id", "name")
    exclude = ("token_hash",)
    actions = ["revoke"]

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        apply_to_each(self, request, queryset, token_revoke, "Revoked")


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ("name", "id", "tenant", "job_type", "revision", "paused", "next_run_at", "deleted_at")
    list_filter = ("paused", "job_type", "tenant")
    search_fields = ("id", "name")
    list_select_related = ("tenant", "job_type")
    readonly_fields = ("next_five_instants",)
    actions = ["pause", "resume", "run_now"]

    @admin.display(description="Next five instants")
    def next_five_instants(self, obj):
        try:
            rule = parse_rule(obj.recurrence, default_anchor=obj.created_at)
        except RecurrenceError as exc:
            return f"invalid recurrence: {exc}"
        if rule.kind == "after_completion":
            return f"{rule.delay_seconds}s after the previous occurrence completes"
        instants = preview(rule, timezone.now(), 5)
        return format_html_join(
            "\n", "<div>{} ({})</div>", ((at.isoformat(), local_rendering(rule, at)) for at in instants)
        )

    @admin.action(description="Pause selected schedules")
    def pause(self, request, queryset):
        apply_to_each(
            self, request, queryset, lambda s: schedule_pause(tenant=s.tenant, schedule_id=s.id), "Paused"
        )

    @admin.action(description="Resume selected schedules")
    def resume(self, request, queryset):
        apply_to_each(
            self, request, queryset, lambda s: schedule_resume(tenant=s.tenant, schedule_id=s.id), "Resumed"
        )

    @admin.action(description="Run selected schedules once, now")
    def run_now(self, request, queryset):
        apply_to_each(
            self,
            request,
            queryset,
            lambda s: run_once(tenant=s.tenant, schedule_id=s.id),
            "Queued a run for",
        )
