"""Tenants, credentials, job types, schedules and their immutable revisions, request keys."""

import hashlib

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from kernel.ids import new_id


def new_tenant_id():
    return new_id("ten")


def new_token_id():
    return new_id("tok")


def new_schedule_id():
    return new_id("sch")


def new_calendar_id():
    return new_id("cal")


def new_action_id():
    return new_id("act")


class ResourceClass(models.TextChoices):
    SHORT = "short"
    LONG = "long"
    MEMORY = "memory"


class UncertainEffectPolicy(models.TextChoices):
    RETRY = "retry"  # at-least-once delivery under the same action identity
    HOLD = "hold"  # wait for reconciliation or an operator's decision


class MisfirePolicy(models.TextChoices):
    LATEST_ONLY = "latest_only"
    SKIP = "skip"
    RUN_ALL = "run_all"


class OverlapPolicy(models.TextChoices):
    BUFFER_ONE = "buffer_one"
    SKIP = "skip"
    ALLOW = "allow"


class JobType(models.Model):
    """The catalog entry of an approved job, synced from its ``@scheduler_job`` declaration
    (workers.jobs); the authority and the API read this row, never the declaration."""

    name = models.CharField(primary_key=True, max_length=100)
    resource_class = models.CharField(max_length=16, choices=ResourceClass.choices)
    params_schema = models.JSONField(default=dict)
    params_schema_version = models.PositiveIntegerField(default=1)
    default_lease_seconds = models.PositiveIntegerField(default=30)
    timeout_seconds = models.PositiveIntegerField(default=300)
    max_attempts = models.PositiveIntegerField(default=3)
    initial_delay_seconds = models.FloatField(default=5)
    max_delay_seconds = models.FloatField(default=300)
    uncertain_effect_policy = models.CharField(
        max_length=8, choices=UncertainEffectPolicy.choices, default=UncertainEffectPolicy.HOLD
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(default_lease_seconds__gte=1, default_lease_seconds__lte=3600),
                name="jobtype_lease_in_range",
            ),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="jobtype_attempts_positive"),
        ]

    def __str__(self):
        return self.name


DEFAULT_MAX_STORED_BYTES = 10 * 1024**3  # 10 GiB


class Tenant(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_tenant_id, editable=False)
    name = models.CharField(max_length=200, unique=True)
    max_schedules = models.PositiveIntegerField(default=1000)
    max_active_runs = models.PositiveIntegerField(default=100)
    # Email recipients per UTC day over all of the tenant's email effects.
    max_emails_per_day = models.PositiveIntegerField(default=1000)
    # Manual runs (run once) not yet claimed: pending or queued.
    max_pending_manual_runs = models.PositiveIntegerField(default=1000)
    # Bytes its results may hold in the object store (runs.TenantStorage): past it, uploads
    # are refused until retention frees room.
    max_stored_bytes = models.PositiveBigIntegerField(default=DEFAULT_MAX_STORED_BYTES,
                                                      db_default=DEFAULT_MAX_STORED_BYTES)
    weight = models.PositiveIntegerField(default=1)
    # Set once a schedule of the tenant has a concurrency key: only such tenants' claims read
    # their keys (runs.authority.claims), so a tenant without keys costs a claim nothing more.
    uses_concurrency_keys = models.BooleanField(default=False, db_default=False)
    allowed_job_types = models.ManyToManyField(JobType, blank=True, related_name="tenants")
    # Celery task names the tenant may run through the `celery.task` job type (exact names).
    celery_tasks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(weight__gte=1), name="tenant_weight_positive")]

    def __str__(self):
        return self.name


class TokenKind(models.TextChoices):
    TENANT = "tenant"
    WORKER = "worker"
    OPERATOR = "operator"  # reads the whole installation's capacity; no tenant


class ApiToken(models.Model):
    """A bearer credential; only the SHA-256 of the secret is stored."""

    id = models.CharField(primary_key=True, max_length=40, default=new_token_id, editable=False)
    kind = models.CharField(max_length=8, choices=TokenKind.choices)
    name = models.CharField(max_length=200)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    # A worker token may claim only these resource classes; empty: every class.
    resource_classes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="tenant") & Q(tenant__isnull=False))
                | (Q(kind__in=["worker", "operator"]) & Q(tenant__isnull=True)),
                name="apitoken_tenant_iff_tenant_kind",
            )
        ]

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    def __str__(self):
        return f"{self.kind}:{self.name}"


DEFAULT_CONCURRENCY_LIMIT = 1  # a key nobody set a limit for: one attempt at a time
MAX_CONCURRENCY_KEY_LENGTH = 100
MAX_CONCURRENCY_LIMIT = 100_000  # more than any tenant's active-run quota: a larger one limits nothing
# A concurrency key: letters, digits and . _ : - (it is a path segment of /concurrency-keys/{key}).
CONCURRENCY_KEY = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$",
                                 message="letters, digits and . _ : - only, starting with a letter or digit")
MAX_PAUSE_REASON_LENGTH = 500
# Expectations (schedule health): the bounds a request may give them.
MAX_EXPECTATION_SECONDS = 7 * 86400
MAX_EXPECTED_FAILURES = 100


class Schedule(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_schedule_id, editable=False)
    # schedule_tenant_idx serves tenant look-ups; job types are few and never deleted in bulk.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="schedules", db_index=False)
    name = models.CharField(max_length=200)
    job_type = models.ForeignKey(JobType, on_delete=models.PROTECT, related_name="schedules", db_index=False)
    recurrence = models.JSONField()
    params = models.JSONField(default=dict)
    revision = models.PositiveIntegerField(default=1)
    misfire_policy = models.CharField(
        max_length=16, choices=MisfirePolicy.choices, default=MisfirePolicy.LATEST_ONLY
    )
    misfire_grace_seconds = models.PositiveIntegerField(default=60)
    overlap_policy = models.CharField(
        max_length=16, choices=OverlapPolicy.choices, default=OverlapPolicy.BUFFER_ONE
    )
    retry_max_attempts = models.PositiveIntegerField(default=3)
    retry_initial_delay_seconds = models.FloatField(default=5)
    retry_max_delay_seconds = models.FloatField(default=300)
    effects = models.JSONField(default=dict, blank=True)
    # A strict start promise (admission refuses a wave that would miss it); null: ordinary.
    start_deadline_seconds = models.PositiveIntegerField(null=True, blank=True)
    # User-approved jitter: each occurrence is due up to this many seconds after its instant.
    jitter_seconds = models.PositiveIntegerField(default=0, db_default=0)
    # At most ConcurrencyLimit.max_running (1 without one) attempts of the tenant's schedules
    # with this key run at once, checked by the claim; "": none.
    concurrency_key = models.CharField(max_length=MAX_CONCURRENCY_KEY_LENGTH, blank=True, default="", db_default="",
                                       validators=[CONCURRENCY_KEY])
    paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    # First instant not yet materialized when paused; resume applies the misfire policy from it.
    resume_from = models.DateTimeField(null=True, blank=True)
    # A timed pause ends by itself at this instant (database time; runs.authority.resume_due_pauses).
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.CharField(max_length=MAX_PAUSE_REASON_LENGTH, blank=True, default="", db_default="")
    # The bulk action whose pause this is (POST /schedules/pause); its resume ends only these.
    pause_action = models.ForeignKey(
        "BulkAction", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    # At most MAX_LABELS string pairs, as given; ScheduleLabel rows index them for filters.
    labels = models.JSONField(default=dict, blank=True, db_default={})
    # The schedule's calendars and policy ({"calendarIds", "policy"}), as its revision holds it;
    # ScheduleCalendar rows index them. Null: none.
    calendar = models.JSONField(null=True, blank=True)
    # next_run_at is the first occurrence after this instant: the calendar-skipped instants
    # in between are recorded when next_run_at is materialized, and a calendar edit computes
    # next_run_at again from here. Null: from next_run_at itself.
    next_run_from = models.DateTimeField(null=True, blank=True)
    # What the health evaluation (runs.health) holds the schedule to, as the API gives it
    # ({"startWithinSeconds", "finishWithinSeconds", "maxConsecutiveFailures", "alert"}); null:
    # none. The three bounds are copied into columns so one statement evaluates every schedule.
    expectations = models.JSONField(null=True, blank=True)
    expect_start_within_seconds = models.PositiveIntegerField(null=True, blank=True)
    expect_finish_within_seconds = models.PositiveIntegerField(null=True, blank=True)
    expect_max_consecutive_failures = models.PositiveIntegerField(null=True, blank=True)
    # Null while paused, deleted, ended, or (after_completion) while an occurrence is active.
    next_run_at = models.DateTimeField(null=True, blank=True)
    # The window (activeFrom, activeUntil): no occurrence outside it; null: open.
    active_from = models.DateTimeField(null=True, blank=True)
    active_until = models.DateTimeField(null=True, blank=True)
    # The schedule ends once this many rule instants were materialized (any outcome, manual and
    # backfilled runs not counted); counted by the materializing transaction, under the lock.
    end_after_occurrences = models.PositiveIntegerField(null=True, blank=True)
    occurrences_materialized = models.PositiveIntegerField(default=0, db_default=0)
    # Bumped by every directive written or removed (schedule_services.directives): a timer armed
    # before it (runs/authority/armed_timers.py) no longer matches the row and takes the locking path.
    directive_seq = models.PositiveIntegerField(default=0, db_default=0)
    # Stable group of schedules scanned together (hash of the id).
    bucket = models.PositiveSmallIntegerField(default=0)
    # Active-run guard: the occurrence that currently holds permission to run. Indexed only
    # where set (schedule_active_run_unique): most schedules hold nothing, and every
    # materialization rewrites the row.
    active_run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Last change by a client (edit, pause, resume, delete); the scheduler's own bookkeeping
    # (next_run_at advancing, the guard moving) leaves it alone.
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["bucket", "next_run_at", "id"],
                name="schedule_due_idx",
                condition=Q(next_run_at__isnull=False),
            ),
            models.Index(fields=["tenant", "id"], name="schedule_tenant_idx"),
            # Timed pauses: the scan's look-up of those due costs nothing while none are.
            models.Index(fields=["paused_until"], name="schedule_paused_until_idx",
                         condition=Q(paused_until__isnull=False)),
            models.Index(fields=["pause_action", "id"], name="schedule_pause_action_idx",
                         condition=Q(pause_action__isnull=False)),
            # The health evaluation's schedules with a start expectation by next instant: the ones
            # overdue, or within the forecast's window, without reading the others.
            models.Index(fields=["next_run_at"], name="schedule_expect_start_idx",
                         condition=Q(expect_start_within_seconds__isnull=False, next_run_at__isnull=False)),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(revision__gte=1), name="schedule_revision_positive"),
            models.CheckConstraint(
                condition=Q(active_from__isnull=True) | Q(active_until__isnull=True) | Q(active_until__gt=F("active_from")),
                name="schedule_window_ordered",
            ),
            models.CheckConstraint(
                condition=Q(retry_max_attempts__gte=1), name="schedule_attempts_positive"
            ),
            models.CheckConstraint(
                condition=Q(paused=False) | Q(next_run_at__isnull=True),
                name="schedule_paused_not_due",
            ),
            models.CheckConstraint(
                condition=Q(paused=True) | (Q(paused_until__isnull=True) & Q(pause_action__isnull=True)),
                name="schedule_pause_details_only_paused",
            ),
            models.UniqueConstraint(
                fields=["active_run"], condition=Q(active_run__isnull=False), name="schedule_active_run_unique"
            ),
            # A scan with no bucket list reads buckets 0..DUE_BUCKETS-1: no schedule may sit outside.
            models.CheckConstraint(
                condition=Q(bucket__lt=settings.DUE_BUCKETS), name="schedule_bucket_in_range"
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.id})"


class AuthorKind(models.TextChoices):
    API = "api"  # a tenant token's request
    ADMIN = "admin"  # an operator in the Django admin (or a management command)
    SCHEDULER = "scheduler"  # the scheduler itself: a timed pause ending


class ScheduleRevision(models.Model):
    """Immutable payload of one revision; occurrences snapshot it at materialization."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="revisions")
    revision = models.PositiveIntegerField()
    payload = models.JSONField()
    author_kind = models.CharField(max_length=9, choices=AuthorKind.choices, default=AuthorKind.API)
    created_at = models.DateTimeField(auto_now_add=True)
    # The edit's effect on the next 30 days' instants, {"added": [...], "removed": [...]}
    # (schedule_services.directives.instants_diff); null for revision 1 and revisions stored before.
    instants_diff = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "revision"], name="schedulerevision_unique")
        ]


MAX_LABELS = 20
MAX_LABEL_KEY_LENGTH = 63
MAX_LABEL_VALUE_LENGTH = 200


class ScheduleLabel(models.Model):
    """One label of a live or deleted schedule, as Schedule.labels holds it: the index
    `GET /schedules?label=k:v` filters by, on PostgreSQL and SQLite alike."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="label_rows", db_index=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=MAX_LABEL_KEY_LENGTH)
    value = models.CharField(max_length=MAX_LABEL_VALUE_LENGTH)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "key"], name="schedulelabel_unique")]
        indexes = [models.Index(fields=["tenant", "key", "value", "schedule"], name="schedulelabel_lookup_idx")]


class BulkAction(models.Model):
    """One `POST /schedules/pause` over the schedules its filter matched: the schedules it
    paused name it (Schedule.pause_action) until they are resumed or paused again."""

    id = models.CharField(primary_key=True, max_length=40, default=new_action_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    filter = models.JSONField()
    paused_until = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=MAX_PAUSE_REASON_LENGTH, blank=True, default="")
    actor_kind = models.CharField(max_length=9, choices=AuthorKind.choices)
    actor = models.CharField(max_length=200)
    paused = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Its resume (POST /schedules/resume): when, and by whom; the scans resume in its name.
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumed_by_kind = models.CharField(max_length=9, choices=AuthorKind.choices, blank=True, default="")
    resumed_by = models.CharField(max_length=200, blank=True, default="")


class AuditAction(models.TextChoices):
    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"
    SKIP = "skip"  # an occurrence directive written (schedule_services.directives), by its action
    HOLD = "hold"
    NOTE = "note"
    CLEAR = "clear_directive"
    RELEASE = "release"  # a held run released


class AuditEntry(models.Model):
    """Who did what to a schedule, and when (authority time), written in the transaction of
    the change. A create or edit names its revision (ScheduleRevision holds the payload)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="audit_entries", db_index=False)
    at = models.DateTimeField()
    actor_kind = models.CharField(max_length=9, choices=AuthorKind.choices)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "id"], name="auditentry_tenant_idx"),
            models.Index(fields=["schedule", "id"], name="auditentry_schedule_idx"),
            # ?since= of a recent instant: its few entries, not a walk back through older ones.
            models.Index(fields=["tenant", "at"], name="auditentry_tenant_at_idx"),
        ]


class DirectiveAction(models.TextChoices):
    SKIP = "skip"  # the occurrence is recorded skipped, skipReason "directive"
    HOLD = "hold"  # created pending, pendingReason "held", until released
    NOTE = "note"  # the run carries the note


MAX_DIRECTIVES = 1000  # per schedule, orphaned ones included
MAX_DIRECTIVE_NOTE_LENGTH = 500


class OccurrenceDirective(models.Model):
    """What to do with one future instant of a schedule, read by the transaction that
    materializes the instant (runs.authority.materialize.build_wave). Written only under the
    schedule's lock and only while the instant is not materialized (schedule_services.directives)."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="directives", db_index=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    instant = models.DateTimeField()
    action = models.CharField(max_length=8, choices=DirectiveAction.choices)
    note = models.CharField(max_length=MAX_DIRECTIVE_NOTE_LENGTH, blank=True, default="")
    created_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=9, choices=AuthorKind.choices)
    actor = models.CharField(max_length=200)
    # Set by an edit whose rule no longer produces the instant: kept, listed, never applied.
    orphaned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "instant"], name="directive_one_per_instant")]
        # Retention deletes those of past instants.
        indexes = [models.Index(fields=["instant"], name="directive_instant_idx")]


class RequestKey(models.Model):
    """Idempotency key -> hash of the request and the id it created, in the creating transaction."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="request_keys")
    scope = models.CharField(max_length=100)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    resource_id = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "scope", "key"], name="requestkey_unique")
        ]
        indexes = [models.Index(fields=["created_at"], name="requestkey_created_idx")]


class BeatImport(models.Model):
    """A django-celery-beat PeriodicTask imported as a schedule (manage.py import_beat).

    Keyed on the PeriodicTask's name (unique in beat), so importing again creates nothing new
    even after the schedule was renamed or deleted."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="beat_imports")
    periodic_task_name = models.CharField(max_length=200)
    periodic_task_id = models.PositiveIntegerField()
    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "periodic_task_name"], name="beatimport_unique")
        ]


class ShadowDisagreement(models.Model):
    """A next instant on which a shadow recurrence engine (RECURRENCE_ENGINE=shadow:<name>)
    disagreed with the active one at a materialization: evidence before activating it."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="+")
    candidate = models.CharField(max_length=100)
    recurrence = models.JSONField()
    after = models.DateTimeField()  # both engines were asked for the next instant after this
    active_next = models.DateTimeField(null=True, blank=True)
    candidate_next = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "candidate", "after"], name="shadowdisagreement_unique")
        ]


class ConcurrencyLimit(models.Model):
    """How many attempts of a tenant's schedules sharing a concurrency key may run at once
    (PUT /api/v1/concurrency-keys/{key}); a key without a row allows DEFAULT_CONCURRENCY_LIMIT."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="concurrency_limits")
    key = models.CharField(max_length=MAX_CONCURRENCY_KEY_LENGTH, validators=[CONCURRENCY_KEY])
    max_running = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(MAX_CONCURRENCY_LIMIT)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key"], name="concurrencylimit_unique"),
            models.CheckConstraint(condition=Q(max_running__gte=1), name="concurrencylimit_positive"),
        ]

    def __str__(self):
        return f"{self.key}: {self.max_running}"


MAX_CALENDAR_DATES = 10_000  # excluded dates one calendar may hold (an .ics import included)
MAX_CALENDAR_NAME_LENGTH = 200


class Calendar(models.Model):
    """A tenant's calendar: local dates (in `timezone`) its schedules treat as excluded.
    Revisioned like schedules: each edit is a new CalendarRevision, the row holds the current."""

    id = models.CharField(primary_key=True, max_length=40, default=new_calendar_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="calendars", db_index=False)
    name = models.CharField(max_length=MAX_CALENDAR_NAME_LENGTH)
    timezone = models.CharField(max_length=64, default="UTC")
    exclude_dates = models.JSONField(default=list, blank=True)  # ["2027-07-05", ...], sorted
    exclude_annual = models.JSONField(default=list, blank=True)  # ["12-25", ...], sorted
    exclude_weekdays = models.JSONField(default=list, blank=True)  # ISO weekdays, 1 = Monday
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "id"], name="calendar_tenant_idx")]
        constraints = [models.CheckConstraint(condition=Q(revision__gte=1), name="calendar_revision_positive")]

    def __str__(self):
        return f"{self.name} ({self.id})"


class CalendarRevision(models.Model):
    """Immutable payload of one revision of a calendar."""

    calendar = models.ForeignKey(Calendar, on_delete=models.CASCADE, related_name="revisions")
    revision = models.PositiveIntegerField()
    payload = models.JSONField()
    author_kind = models.CharField(max_length=9, choices=AuthorKind.choices, default=AuthorKind.API)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["calendar", "revision"], name="calendarrevision_unique")]


class ScheduleCalendar(models.Model):
    """A live schedule reads this calendar (its `calendar` field or a business_day rule): the
    index a calendar edit and a calendar delete look schedules up by."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="calendar_rows", db_index=False)
    calendar = models.ForeignKey(Calendar, on_delete=models.PROTECT, related_name="schedule_rows", db_index=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "calendar"], name="schedulecalendar_unique")]
        indexes = [models.Index(fields=["calendar", "schedule"], name="schedulecalendar_lookup_idx")]
