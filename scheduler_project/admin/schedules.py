"""Operator views. Schedules are changed only through the services (revisioned, locked):
their form calls the API's validation and services, the pause/resume/run-now actions the
services too."""

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from kernel.clock import authority_now
from kernel.errors import DomainError
from runs.authority import run_once, schedule_resume
from runs.capacity.statistics import job_type_statistics, schedule_durations, schedule_statistics
from runs.models import Run
from schedule_services.directives import directive_delete, occurrences_between, orphaned_directives
from schedule_services.lifecycle import schedule_pause
from scheduler_project.admin.forms import ScheduleForm, preview_lines, schedule_zone, zoned
from schedules.audit import staff_actor
from schedules.models import (
    ApiToken, AuditEntry, BulkAction, ConcurrencyLimit, JobType, OccurrenceDirective, Schedule, ShadowDisagreement,
    Tenant,
)
from schedules.recurrence import RecurrenceError, parse_rule
from schedules.selectors import schedule_rule
from schedules.tenants import token_revoke


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


def statistics_table(stats, expected: float, source: str):
    """Runtime statistics (runs.capacity.statistics.RuntimeStats) as a small table, with the
    duration forecasts expect of one run and where that figure comes from."""
    rows = format_html_join("\n", "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
        (label, *(_seconds(values[key]) for key in ("p50", "p95", "p99", "mean")))
        for label, values in (("duration", stats.duration), ("queue delay", stats.queue_delay))
    ))
    return format_html(
        "<table><thead><tr><th></th><th>p50</th><th>p95</th><th>p99</th><th>mean</th></tr></thead><tbody>{}</tbody>"
        "</table><p>{} accepted attempts in the window; forecasts expect {} per run ({})</p>",
        rows, stats.samples, _seconds(expected), source,
    )


def _seconds(value) -> str:
    return "-" if value is None else f"{value:g} s"


@admin.register(JobType)
class JobTypeAdmin(admin.ModelAdmin):
    list_display = ("name", "resource_class", "default_lease_seconds", "max_attempts", "enabled")
    list_filter = ("resource_class", "enabled")
    readonly_fields = ("name", "params_schema", "params_schema_version", "runtime_statistics")

    def get_readonly_fields(self, request, obj=None):
        # A new type needs its name; an existing one keeps its identity and schema.
        return () if obj is None else self.readonly_fields

    @admin.display(description="runtime statistics (rolling window)")
    def runtime_statistics(self, obj):
        stats = job_type_statistics(obj.name)
        return statistics_table(stats, stats.expected_duration(), "its mean, or the default without samples")


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


def audit_details_text(entry: AuditEntry) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(entry.details.items()))


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """Who created, changed, paused, resumed or deleted which schedule, and when (read-only)."""

    list_display = ("at", "tenant", "schedule", "actor_kind", "actor", "action", "details")
    list_filter = ("action", "actor_kind")
    search_fields = ("schedule__id", "schedule__name", "actor")
    list_select_related = ("tenant", "schedule")
    date_hierarchy = "at"


@admin.register(BulkAction)
class BulkActionAdmin(ReadOnlyAdmin):
    """Bulk pauses (POST /schedules/pause): their filter and how many schedules each paused."""

    list_display = ("id", "tenant", "actor", "paused", "paused_until", "reason", "created_at")
    search_fields = ("id", "actor")


class DeletedFilter(admin.SimpleListFilter):
    """Live schedules unless the operator asks for the deleted ones (or all)."""

    title = "deleted"
    parameter_name = "deleted"

    def lookups(self, request, model_admin):
        return (("no", "Live"), ("yes", "Deleted"), ("all", "All"))

    def choices(self, changelist):
        current = self.value() or "no"
        for value, title in self.lookup_choices:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": title,
            }

    def queryset(self, request, queryset):
        value = self.value() or "no"
        if value == "all":
            return queryset
        return queryset.filter(deleted_at__isnull=(value == "no"))


RECURRENCE = ("recurrence_kind", "cron", "dialect", "timezone", "every_seconds", "anchor", "delay_seconds",
              "rrule", "dtstart", "exdates", "rdates", "days", "at_time", "calendar_ids", "calendar")
POLICIES = (
    "misfire_policy", "misfire_grace_seconds", "overlap_policy",
    "retry_max_attempts", "retry_initial_delay_seconds", "retry_max_delay_seconds",
)
CAPACITY = ("start_deadline_seconds", "jitter_seconds", "concurrency_key")
WINDOW = ("active_from", "active_until", "end_after_occurrences")
CONTROL = ("expected_revision", "previewed")
SUMMARY = ("id", "tenant", "job_type", "job_type_available", "revision", "paused", "pause_reason", "pause_action")
TIMES = ("zone", "next_run", "created", "updated", "paused_since", "paused_until_shown", "deleted", "next_five_instants")
VIEW_ONLY = ("name", "params", "recurrence", "misfire_policy", "misfire_grace_seconds", "overlap_policy",
             "retry_max_attempts", "retry_initial_delay_seconds", "retry_max_delay_seconds", *CAPACITY, "effects",
             *WINDOW, "occurrences_materialized", "labels", "calendar", "expectations")
RECENT_RUNS = 20
RECENT_AUDIT = 20
COMING_OCCURRENCES = 10


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Create and edit through the API's validation and services (ScheduleForm); pause,
    resume and run-now as actions through the services. Times are on the schedule's zone."""

    form = ScheduleForm
    list_display = ("name", "id", "tenant", "job_type", "revision", "paused", "next_run", "deleted_at")
    list_filter = (DeletedFilter, "paused", "job_type", "tenant")
    search_fields = ("id", "name")
    list_select_related = ("tenant", "job_type")
    actions = ["pause", "resume", "run_now"]

    @csrf_protect_m
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """Not in one transaction, as the admin's forms usually are: the write is the form's
        service call, in a transaction of its own, and a strict schedule's admission computes
        its forecast before that, holding no lock another writer needs (on the embedded
        SQLite a transaction holds the only write lock)."""
        return self._changeform_view(request, object_id, form_url, extra_context)

    def has_change_permission(self, request, obj=None):
        # A deleted schedule is history: viewable, never edited.
        return super().has_change_permission(request, obj) and (obj is None or obj.deleted_at is None)

    def has_delete_permission(self, request, obj=None):
        return False

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [
                (None, {"fields": ("tenant", "name", "job_type", "params")}),
                ("Recurrence", {"fields": RECURRENCE}),
                ("Window", {"fields": WINDOW}),
                ("Policies", {"fields": POLICIES}),
                ("Capacity", {"fields": CAPACITY}),
                ("Effects", {"fields": ("effects", "expectations", "labels", *CONTROL)}),
            ]
        if self.has_change_permission(request, obj):
            editable = [
                (None, {"fields": (*SUMMARY, "name", "params", "labels")}),
                ("Recurrence", {"fields": RECURRENCE}),
                ("Window", {"fields": (*WINDOW, "occurrences_materialized")}),
                ("Policies", {"fields": POLICIES}),
                ("Capacity", {"fields": CAPACITY}),
                ("Effects", {"fields": ("effects", "expectations", *CONTROL)}),
            ]
        else:
            editable = [(None, {"fields": (*SUMMARY, *VIEW_ONLY)})]
        return [
            *editable,
            ("Times, in the schedule's zone", {"fields": TIMES}),
            ("Runtime statistics (rolling window)", {"fields": ("runtime_statistics",)}),
            (f"Recent runs (last {RECENT_RUNS})", {"fields": ("recent_runs",)}),
            (f"Audit (last {RECENT_AUDIT})", {"fields": ("recent_audit",)}),
            ("Coming occurrences and their directives", {"fields": ("coming_occurrences",)}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else (*SUMMARY, *TIMES, "runtime_statistics", "recent_runs", "occurrences_materialized",
                                       "recent_audit", "coming_occurrences")

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.actor = staff_actor(request.user)  # the form's class is made for this request
        return form

    def save_model(self, request, obj, form, change):
        """Nothing left to write: the form's service call wrote the schedule and its revision."""

    @admin.display(description="job type available")
    def job_type_available(self, obj):
        if obj.job_type.enabled:
            return "yes"
        return ("no: the job type is no longer declared; this schedule's runs wait (job_type_unavailable) until "
                "it is declared again (SCHEDULER_JOB_MODULES)")

    @admin.display(description="time zone")
    def zone(self, obj):
        return schedule_zone(obj)

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, obj):
        return zoned(obj.next_run_at, schedule_zone(obj))

    @admin.display(description="created")
    def created(self, obj):
        return zoned(obj.created_at, schedule_zone(obj))

    @admin.display(description="last changed by a client")
    def updated(self, obj):
        return zoned(obj.updated_at, schedule_zone(obj))

    @admin.display(description="paused since")
    def paused_since(self, obj):
        return zoned(obj.paused_at, schedule_zone(obj)) if obj.paused else "-"

    @admin.display(description="paused until")
    def paused_until_shown(self, obj):
        return zoned(obj.paused_until, schedule_zone(obj)) if obj.paused_until else "-"

    @admin.display(description="entries")
    def recent_audit(self, obj):
        entries = AuditEntry.objects.filter(schedule=obj).order_by("-id")[:RECENT_AUDIT]
        zone = schedule_zone(obj)
        rows = format_html_join(
            "\n", "<tr><td>{}</td><td>{}: {}</td><td>{}</td><td>{}</td></tr>",
            ((zoned(e.at, zone), e.actor_kind, e.actor or "-", e.action, audit_details_text(e)) for e in entries),
        )
        every = reverse("admin:schedules_auditentry_changelist") + "?" + urlencode({"q": obj.id})
        return format_html(
            "<table><thead><tr><th>at</th><th>actor</th><th>action</th><th>details</th></tr></thead><tbody>{}</tbody>"
            "</table><p><a href=\"{}\">every entry of this schedule</a></p>",
            rows or mark_safe("<tr><td colspan=\"4\">no entries</td></tr>"), every,
        )

    @admin.display(description="deleted")
    def deleted(self, obj):
        return zoned(obj.deleted_at, schedule_zone(obj))

    @admin.display(description="Next five instants")
    def next_five_instants(self, obj):
        try:
            parse_rule(obj.recurrence, default_anchor=obj.created_at)
        except RecurrenceError as exc:
            return f"invalid recurrence: {exc}"
        return format_html_join("\n", "<div>{}</div>", ((line,) for line in preview_lines(schedule_rule(obj))))

    @admin.display(description="this schedule's accepted attempts")
    def runtime_statistics(self, obj):
        own = schedule_durations([obj.id]).get(obj.id)
        if own is not None:
            return statistics_table(schedule_statistics(obj.id), own, "its own mean")
        return statistics_table(schedule_statistics(obj.id), job_type_statistics(obj.job_type_id).expected_duration(),
                                "its job type's: too few samples of its own")

    @admin.display(description="next instants")
    def coming_occurrences(self, obj):
        """The next instants with their directives (set them on the console's schedule page)."""
        if obj.deleted_at is not None:
            return "deleted"
        now, zone = authority_now(), schedule_zone(obj)
        rows = format_html_join("\n", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (zoned(o.at, zone),
             f"{o.directive.action}{': ' + o.directive.note if o.directive.note else ''} (by {o.directive.actor})"
             if o.directive else "", o.state or "")
            for o in occurrences_between(obj, now, now + timedelta(days=366), COMING_OCCURRENCES)))
        orphaned = len(orphaned_directives(obj))
        every = reverse("admin:schedules_occurrencedirective_changelist") + "?" + urlencode({"q": obj.id})
        return format_html(
            "<table><thead><tr><th>instant</th><th>directive</th><th>run</th></tr></thead><tbody>{}</tbody></table>"
            "<p>{} orphaned by an edit. <a href=\"{}\">every directive of this schedule</a>. "
            "<a href=\"{}\">Skip, hold, note or release on the console</a></p>",
            rows or mark_safe("<tr><td colspan=\"3\">no coming instants</td></tr>"), orphaned, every,
            reverse("console:schedule", args=[obj.id]),
        )

    @admin.display(description="runs")
    def recent_runs(self, obj):
        runs = Run.objects.filter(schedule=obj).order_by("-scheduled_at", "-id")[:RECENT_RUNS]
        zone = schedule_zone(obj)
        rows = format_html_join(
            "\n",
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (reverse("admin:runs_run_change", args=[run.id]), run.id, run.trigger, run.state,
                 zoned(run.scheduled_at, zone), zoned(run.finished_at, zone), run.attempt_count)
                for run in runs
            ),
        )
        every = reverse("admin:runs_run_changelist") + "?" + urlencode({"q": obj.id})
        return format_html(
            "<table><thead><tr><th>run</th><th>trigger</th><th>state</th><th>scheduled</th><th>finished</th>"
            "<th>attempts</th></tr></thead><tbody>{}</tbody></table><p><a href=\"{}\">every run of this schedule</a></p>",
            rows or mark_safe("<tr><td colspan=\"6\">no runs yet</td></tr>"),
            every,
        )
    @admin.action(description="Pause selected schedules")
    def pause(self, request, queryset):
        actor = staff_actor(request.user)
        apply_to_each(
            self, request, queryset, lambda s: schedule_pause(tenant=s.tenant, schedule_id=s.id, actor=actor), "Paused"
        )

    @admin.action(description="Resume selected schedules")
    def resume(self, request, queryset):
        actor = staff_actor(request.user)
        apply_to_each(
            self, request, queryset, lambda s: schedule_resume(tenant=s.tenant, schedule_id=s.id, actor=actor),
            "Resumed",
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


@admin.register(ConcurrencyLimit)
class ConcurrencyLimitAdmin(admin.ModelAdmin):
    """A tenant's limits on attempts of a concurrency key running at once (as PUT
    /api/v1/concurrency-keys/{key}); a key without one allows 1."""

    list_display = ("key", "tenant", "max_running", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("key",)
    list_select_related = ("tenant",)


class OrphanedFilter(admin.SimpleListFilter):
    """Directives an edit orphaned (its rule no longer produces their instant) or not."""

    title = "orphaned by an edit"
    parameter_name = "orphaned"

    def lookups(self, request, model_admin):
        return (("no", "No: applied when the instant comes"), ("yes", "Yes: kept, never applied"))

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(orphaned_at__isnull=(self.value() == "no"))
        return queryset


@admin.register(OccurrenceDirective)
class OccurrenceDirectiveAdmin(ReadOnlyAdmin):
    """Skip, hold and note directives on single coming instants (read-only). They are set
    through the API or the console's schedule page, which check that the instant is one the
    rule produces and not yet materialized, under the schedule's lock, and audit it; the one
    action here, removal, goes through the same service."""

    list_display = ("schedule", "instant_shown", "action", "note", "actor_kind", "actor", "created_at", "orphaned_at")
    list_filter = ("action", OrphanedFilter, "actor_kind", "tenant")
    search_fields = ("schedule__id", "schedule__name", "note", "actor")
    list_select_related = ("schedule", "tenant")
    date_hierarchy = "instant"
    ordering = ("instant", "schedule_id")
    actions = ["remove"]

    @admin.action(description="Remove selected directives (not yet applied)")
    def remove(self, request, queryset):
        actor = staff_actor(request.user)
        apply_to_each(self, request, queryset.select_related("tenant"), lambda d: directive_delete(
            tenant=d.tenant, schedule_id=d.schedule_id, at=d.instant, actor=actor), "Removed")

    @admin.display(description="instant (the schedule's zone)", ordering="instant")
    def instant_shown(self, obj):
        return zoned(obj.instant, schedule_zone(obj.schedule))


@admin.register(ShadowDisagreement)
class ShadowDisagreementAdmin(ReadOnlyAdmin):
    """Where a shadow recurrence engine disagreed with the active one (RECURRENCE_ENGINE)."""

    list_display = ("schedule", "candidate", "after", "active_next", "candidate_next", "recorded_at")
    list_filter = ("candidate",)
    search_fields = ("schedule__id", "schedule__name")
    date_hierarchy = "recorded_at"

