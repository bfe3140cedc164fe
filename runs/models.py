"""Occurrences (runs), attempts, the outbox, the object registry and the effect intents of
canonical results (with their deliveries).

Only runs.authority changes a run's state, fence, lease, attempts or result pointer.
"""

from django.db import models
from django.db.models import Q

from kernel.ids import new_id


def new_run_id():
    return new_id("run")


def new_attempt_id():
    return new_id("att")


class RunState(models.TextChoices):
    PENDING = "pending"  # exists, not claimable yet: future due time, overlap guard, retry delay
    QUEUED = "queued"  # claimable now
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    SKIPPED = "skipped"


TERMINAL_STATES = (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELED, RunState.SKIPPED)
ACTIVE_STATES = (RunState.PENDING, RunState.QUEUED, RunState.RUNNING)
# Runs in ACTIVE_STATES, as the live indexes find them: finished_at is set in the same write
# that moves a run to a terminal state, and only then (runs.integrity checks it).
UNFINISHED = Q(finished_at__isnull=True)


class PendingReason(models.TextChoices):
    NONE = ""
    NOT_DUE = "not_due"
    OVERLAP = "overlap"  # waiting for the schedule's active-run guard
    RETRY = "retry"  # waiting out a retry backoff
    BACKFILL = "backfill"  # a backfilled past instant, released a share per scan cycle
    HELD = "held"  # a hold directive: waits for POST /runs/{id}/release (or a cancel)


# A waiting run's pendingReason in the API when its job type has no declaration any more:
# derived when the run is read (the catalog says it), never stored.
JOB_TYPE_UNAVAILABLE = "job_type_unavailable"
# A queued run's pendingReason in the API while its schedule's concurrency key has as many
# attempts running as its limit allows: derived when the run is read, never stored.
CONCURRENCY_KEY = "concurrency_key"


class SkipReason(models.TextChoices):
    MISFIRE = "misfire"
    OVERLAP = "overlap"
    CALENDAR = "calendar"  # its local date is excluded by one of the schedule's calendars
    DIRECTIVE = "directive"  # a skip directive on the instant (schedules.models.OccurrenceDirective)


class Trigger(models.TextChoices):
    SCHEDULE = "schedule"
    MANUAL = "manual"


# Work a client asked for (a run once, a backfilled past instant) rather than an instant the
# scanner reached: its lateness starts when it was created, and while unclaimed a backfill
# counts it against the tenant's maxPendingManualRuns (operations.check_requested_work_quota).
REQUESTED = Q(trigger=Trigger.MANUAL) | Q(backfilled=True)


def owed_since_expression(instant: str = "due_at"):
    """owed_since as a database expression over a run's `instant` column (a query's filter
    or order by it)."""
    from django.db.models import Case, F, When
    from django.db.models.functions import Greatest

    return Case(When(REQUESTED, then=Greatest(F(instant), F("created_at"))), default=F(instant))


def owed_since(instant, *, created_at, trigger: str, backfilled: bool):
    """Since when a run's start is owed for `instant` (its scheduled or due instant): that
    instant, except that requested work (REQUESTED: a run once with a past runAt, a backfilled
    instant) cannot be late before it existed. The scanner's own occurrences count from their
    instant even when created late: a scanner that stopped made them late."""
    if trigger == Trigger.MANUAL or backfilled:
        return max(instant, created_at)
    return instant


class Run(models.Model):
    """One intended run of a schedule: the occurrence."""

    id = models.CharField(primary_key=True, max_length=40, default=new_run_id, editable=False)
    # No single-column FK indexes: run_history_idx leads with schedule, and tenant lookups
    # go through the partial claim/running indexes. Fewer indexes, faster 09:00 waves.
    schedule = models.ForeignKey(
        "schedules.Schedule", on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    tenant = models.ForeignKey("schedules.Tenant", on_delete=models.PROTECT, related_name="runs", db_index=False)
    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.SCHEDULE)
    revision = models.PositiveIntegerField()
    # Snapshot of the revision's payload: every attempt executes exactly this.
    payload = models.JSONField(default=dict)
    job_type = models.CharField(max_length=100)
    resource_class = models.CharField(max_length=16)
    state = models.CharField(max_length=10, choices=RunState.choices)
    pending_reason = models.CharField(max_length=8, choices=PendingReason.choices, blank=True, default="")
    skip_reason = models.CharField(max_length=16, choices=SkipReason.choices, null=True, blank=True)
    # The note of the instant's directive (any action), copied when it was materialized.
    note = models.CharField(max_length=500, blank=True, default="", db_default="")
    # A skipped range record stands for skipped_count instants from scheduled_at to skipped_through.
    skipped_count = models.PositiveIntegerField(null=True, blank=True)
    skipped_through = models.DateTimeField(null=True, blank=True)
    scheduled_at = models.DateTimeField()
    # The rule instant a schedule's calendar moved this occurrence from (shift_before/after).
    shifted_from = models.DateTimeField(null=True, blank=True)
    # When the run becomes claimable: scheduled_at, or the end of a retry backoff.
    due_at = models.DateTimeField()
    fence = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempt_count = models.PositiveIntegerField(default=0)
    # Number of dispatch intents written for this run; names the next one's action key.
    dispatch_count = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    # Both attempt pointers are indexed only where set (run_current_attempt_idx, run_accepted_attempt_idx).
    current_attempt = models.ForeignKey(
        "runs.Attempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    holds_guard = models.BooleanField(default=False)
    # A scheduled occurrence of a schedule with a start promise (startDeadlineSeconds): claims
    # serve it first, and it may take the slots reserved for strict work (STRICT_RESERVED_SHARE).
    strict = models.BooleanField(default=False, db_default=False)
    # Created by a backfill request for a past instant (a scheduled occurrence all the same).
    # Like a manual run it is requested work: it counts against the tenant's quota of work
    # waiting to be claimed, and its lateness is measured from its creation (REQUESTED).
    backfilled = models.BooleanField(default=False, db_default=False)
    cancellation_requested = models.BooleanField(default=False)
    cancellation_accepted = models.BooleanField(default=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Canonical result pointer: set once, by the accepted attempt's publication.
    accepted_attempt = models.ForeignKey(
        "runs.Attempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    result_key = models.CharField(max_length=500, null=True, blank=True)
    result_version_id = models.CharField(max_length=200, null=True, blank=True)
    result_checksum = models.CharField(max_length=71, null=True, blank=True)
    result_size = models.BigIntegerField(null=True, blank=True)
    result_content_type = models.CharField(max_length=200, null=True, blank=True)
    # The job's last ctx.progress() of attempt number progress_attempt, written only while that
    # attempt owns the run (runs.authority.run_progress); the API shows it for the latest attempt.
    progress_fraction = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=500, blank=True, default="", db_default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    progress_attempt = models.PositiveIntegerField(null=True, blank=True)
    # Authority time inside the creating transaction (history watermarks rely on it).
    created_at = models.DateTimeField()
    # Each replay of the run once failed (runs.authority.operations.run_replay), oldest first:
    # {"at", "actor", "note", "afterAttempt"} (the attempts it had then); null: never replayed.
    replays = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            # One occurrence per (schedule, due instant); manual run-once runs are keyed by request key.
            models.UniqueConstraint(
                fields=["schedule", "scheduled_at"],
                condition=Q(trigger="schedule"),
                name="run_one_per_instant",
            ),
            # At most one occurrence of a schedule holds its active-run guard.
            models.UniqueConstraint(
                fields=["schedule"], condition=Q(holds_guard=True), name="run_one_guard_holder"
            ),
            models.CheckConstraint(
                condition=Q(holds_guard=False) | Q(state__in=["pending", "queued", "running"]),
                name="run_guard_only_while_active",
            ),
            models.CheckConstraint(
                condition=~Q(state="succeeded")
                | (Q(result_checksum__isnull=False) & Q(accepted_attempt__isnull=False)),
                name="run_succeeded_has_result",
            ),
            models.CheckConstraint(
                condition=~Q(state="running") | Q(lease_expires_at__isnull=False),
                name="run_running_has_lease",
            ),
            models.CheckConstraint(condition=Q(fence__gte=0), name="run_fence_nonnegative"),
        ]
        indexes = [
            models.Index(fields=["schedule", "-scheduled_at", "-id"], name="run_history_idx"),
            # GET /runs pages a tenant's history across its schedules in this order.
            models.Index(fields=["tenant", "-scheduled_at", "-id"], name="run_tenant_history_idx"),
            # The same history narrowed to one finished state (the console's and GET /runs' state
            # filter): a rare state (failed) is read directly, not found by walking the whole
            # history. Finished runs only: live states have indexes of their own, and a claim
            # must never find this index usable (see run_unfinished_idx).
            models.Index(
                fields=["tenant", "state", "-scheduled_at", "-id"],
                name="run_finished_state_idx",
                condition=Q(finished_at__isnull=False),
            ),
            # A tenant's claimable runs in claim order: strict first, then by due instant.
            models.Index(
                fields=["tenant", "-strict", "due_at", "id"],
                name="run_claimable_strict_idx",
                condition=Q(state="queued"),
            ),
            # Pending runs that become claimable at due_at (overlap waiters wait for the guard).
            models.Index(
                fields=["due_at"],
                name="run_promotable_idx",
                condition=Q(state="pending", pending_reason__in=["not_due", "retry"]),
            ),
            # Backfilled instants waiting for their release (runs.authority.backfill).
            models.Index(
                fields=["schedule", "scheduled_at"],
                name="run_backfill_idx",
                condition=Q(state="pending", pending_reason="backfill"),
            ),
            # A schedule's unfinished runs (overlap waiters, the guard's queue) without reading
            # its history: a minutely schedule keeps tens of thousands of finished runs. Keyed
            # on finished_at (set exactly when a run reaches a terminal state), not on state:
            # a predicate a claim's `state = 'queued'` implies would make this index usable
            # by every claim, and with statistics of a table of finished runs (no live row in
            # them, every live index estimated empty) the planner took it, walking the whole
            # wave once per tenant on every claim. Queries read it through UNFINISHED.
            models.Index(
                fields=["schedule", "scheduled_at", "id"],
                name="run_unfinished_idx",
                condition=Q(finished_at__isnull=True),
            ),
            # Running runs: a tenant's, counted at every claim against its active-run limit, and
            # all of them for the sweep, which reads their leases from the rows (running runs
            # are as many as the workers' slots). One index for the state, so that a statement
            # about running runs has no second partial index to mistake for it; and no index
            # holds lease_expires_at, so a heartbeat, which writes only leases, is a HOT update
            # that adds no index entry.
            models.Index(fields=["tenant"], name="run_running_idx", condition=Q(state="running")),
            # The quota of requested work counts a tenant's unclaimed manual and backfilled runs
            # at every run once and backfill; the scanner's occurrences, the 09:00 wave's rows,
            # stay out of the index.
            models.Index(
                fields=["tenant"],
                name="run_requested_waiting_idx",
                condition=REQUESTED & Q(state__in=["pending", "queued"]),
            ),
            # Retention reads finished runs only; unfinished ones stay out of the index.
            models.Index(fields=["finished_at"], name="run_ended_idx", condition=Q(finished_at__isnull=False)),
            # Failures finished lately: the health evaluation's failure streaks start from them.
            models.Index(fields=["finished_at"], name="run_failed_idx", condition=Q(state="failed")),
            # The runs that point at an attempt, for the foreign keys' own look-ups (PostgreSQL's
            # check as retention deletes the attempts, SQLite's as a claim inserts them, SQLite's
            # heartbeat): only where the pointer is set, so a queued run's version writes neither
            # index and a running one's no accepted-attempt entry (3 of a run's 24 entries).
            models.Index(fields=["current_attempt"], name="run_current_attempt_idx",
                         condition=Q(current_attempt__isnull=False)),
            models.Index(fields=["accepted_attempt"], name="run_accepted_attempt_idx",
                         condition=Q(accepted_attempt__isnull=False)),
        ]

    def __str__(self):
        return self.id


class AttemptState(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELED = "canceled"


class AttemptReason(models.TextChoices):
    """Why an attempt ended as it did, where its state alone does not say."""

    NONE = "", "none"
    TIMEOUT = "timeout"  # failed: it ran past its job type's timeout


class Attempt(models.Model):
    """One worker's try at a run, owning the run while its fence is current."""

    id = models.CharField(primary_key=True, max_length=40, default=new_attempt_id, editable=False)
    # No index of its own: attempt_number_unique and attempt_fence_unique both begin with
    # run_id, so either serves every read by run (a third index would be written at every
    # attempt for nothing).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveIntegerField()
    fence = models.BigIntegerField()
    worker_label = models.CharField(max_length=200, blank=True, default="")
    worker_token = models.ForeignKey(
        "schedules.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=10, choices=AttemptState.choices, default=AttemptState.RUNNING)
    lease_seconds = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    # started_at + the job type's timeout (authority time): no lease outlasts it by more than
    # JOB_TIMEOUT_LEASE_GRACE_SECONDS (runs.authority.leases.lease_until). Null: no timeout.
    deadline_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    retryable = models.BooleanField(null=True, blank=True)
    reason = models.CharField(max_length=8, choices=AttemptReason.choices, blank=True, default="", db_default="")
    # When the sweep ended its passed lease (null: it did not). Only the sweep writes it, so
    # the index of expiries holds no column an attempt's end or heartbeat changes: those
    # updates stay HOT (in their page, no index entry), as the table's reserve leaves room.
    expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="attempt_number_unique"),
            models.UniqueConstraint(fields=["run", "fence"], name="attempt_fence_unique"),
        ]
        indexes = [
            # Leases that expired lately (the console's overview), without reading every attempt.
            models.Index(fields=["expired_at"], name="attempt_expired_at_idx", condition=Q(expired_at__isnull=False)),
        ]

    def __str__(self):
        return self.id


class OutboxKind(models.TextChoices):
    DISPATCH = "dispatch"


class Outbox(models.Model):
    """Committed intent, written in the same transaction as the state it announces. The
    action key, run and resource class are the whole message: a hint names no more."""

    kind = models.CharField(max_length=10, choices=OutboxKind.choices)
    action_key = models.CharField(max_length=120, unique=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="outbox")
    resource_class = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField()
    # A relay takes a short lease on the row while it publishes; another relay may
    # retake it after this, so a relay that dies mid-publish loses nothing. In no index
    # (nor is publish_attempts), so the lease is written in the row's page (runs.0032).
    relay_until = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    # The broker incarnation (Redis run_id) that accepted the hint: one that restarted
    # without its data has lost every hint of an older incarnation.
    broker_epoch = models.CharField(max_length=64, blank=True, default="")
    processed_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"
        indexes = [
            models.Index(
                fields=["kind", "id"], name="outbox_unpublished_idx", condition=Q(published_at__isnull=True)
            ),
            models.Index(
                fields=["kind", "published_at"],
                name="outbox_unprocessed_idx",
                condition=Q(processed_at__isnull=True, published_at__isnull=False),
            ),
        ]


class ObjectState(models.TextChoices):
    STAGED = "staged"
    REFERENCED = "referenced"
    DELETING = "deleting"
    DELETED = "deleted"


# A registered object not yet counted in its tenant's TenantStorage (object_to_count_idx).
# Its upload's size is no part of the condition: recording the upload changes no column an
# index reads, so the object is rewritten in its page (runs.0033). Counting takes the recorded
# ones (size known).
UNCOUNTED = Q(counted=False, state__in=["staged", "referenced"])


class StoredObject(models.Model):
    """Object registry: links each upload to its attempt and fence before the upload begins."""

    key = models.CharField(max_length=500, unique=True)
    version_id = models.CharField(max_length=200, null=True, blank=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="stored_objects")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="stored_objects")
    fence = models.BigIntegerField()
    state = models.CharField(max_length=10, choices=ObjectState.choices, default=ObjectState.STAGED)
    checksum = models.CharField(max_length=71, null=True, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True, default="")
    # The job's own file name, which downloads carry; "" for none (they say "result").
    filename = models.CharField(max_length=200, blank=True, default="", db_default="")
    created_at = models.DateTimeField()
    uploaded_at = models.DateTimeField(null=True, blank=True)
    referenced_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Download pin: cleanup may not delete this version before a handed-out URL expires.
    pinned_until = models.DateTimeField(null=True, blank=True)
    # Its size is in its tenant's TenantStorage (counted by cleanup after the upload is
    # recorded, taken off when it is deleted).
    counted = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run"], condition=Q(state="referenced"), name="object_one_canonical_per_run"
            )
        ]
        indexes = [
            models.Index(fields=["state", "created_at"], name="object_state_idx"),
            # Objects whose bytes are not in their tenant's storage yet: few at any time.
            models.Index(fields=["id"], name="object_to_count_idx", condition=UNCOUNTED),
        ]


class TenantStorage(models.Model):
    """The bytes a tenant's stored objects hold (staged or referenced), against its
    max_stored_bytes. Kept off the upload's path: cleanup counts recorded uploads in
    (runs.retention.count_stored_bytes) and takes deleted ones off, so the figure lags the
    store by at most one cleanup pass."""

    tenant = models.OneToOneField("schedules.Tenant", primary_key=True, on_delete=models.CASCADE,
                                  related_name="storage")
    stored_bytes = models.BigIntegerField(default=0)


class ExpectedDuration(models.Model):
    """How long a run of a schedule (with enough history of its own) or of a job type is
    expected to take, as the latest statistics snapshot measured it
    (runs.capacity.statistics.refresh_snapshot): forecasts and admissions read these rows
    instead of joining a week of runs with their attempts each time."""

    SCHEDULE, JOB_TYPE = "schedule", "job_type"
    kind = models.CharField(max_length=8, choices=[(SCHEDULE, "schedule"), (JOB_TYPE, "job type")])
    subject = models.CharField(max_length=100)  # the schedule's id or the job type's name
    seconds = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "subject"], name="expectedduration_unique")]


class StatisticsSnapshot(models.Model):
    """One row (id 1): when the ExpectedDuration rows were measured. Refreshers lock it to
    replace them one at a time."""

    measured_at = models.DateTimeField(null=True)


class WorkerSlots(models.Model):
    """Live capacity: one worker process's slots of one resource class, as it last reported
    them (runs.capacity.live). A row whose expires_at has passed is a process presumed dead."""

    process = models.CharField(max_length=200)
    resource_class = models.CharField(max_length=16)
    slots = models.PositiveIntegerField()
    reported_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "worker slots"
        constraints = [
            models.UniqueConstraint(fields=["process", "resource_class"], name="workerslots_unique")
        ]
        indexes = [models.Index(fields=["expires_at"], name="workerslots_expiry_idx")]


class AdmissionEpoch(models.Model):
    """How many strict promises of a resource class have been admitted (runs.capacity.admission).
    An admission computes its forecast outside any transaction, then, inside the one that
    writes the schedule, moves this from the value it read to the next: if another strict
    admission of the class moved it meanwhile, the forecast missed that promise and is
    computed again. Ordinary writes never touch it."""

    resource_class = models.CharField(max_length=16, primary_key=True)
    epoch = models.BigIntegerField(default=0)


class ScannerMember(models.Model):
    """A live scanner of the bucket directory (runs.scan_directory), while its lease lasts."""

    id = models.CharField(max_length=100, primary_key=True)
    lease_expires_at = models.DateTimeField()  # database time
    joined_at = models.DateTimeField()


class BucketLease(models.Model):
    """One due bucket in the scanner directory: the scanner that serves it, until when
    (database time). Only removes redundant scanning: the unique (schedule, instant) key
    stays the guarantee when two scanners overlap on a bucket."""

    bucket = models.PositiveSmallIntegerField(primary_key=True)
    scanner_id = models.CharField(max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveBigIntegerField(default=0)  # owner changes: the bucket's routing version


def new_incident_id():
    return new_id("inc")


class IncidentKind(models.TextChoices):
    LATE_START = "late_start"  # an occurrence not started startWithinSeconds after its instant
    LONG_RUNNING = "long_running"  # a run not finished finishWithinSeconds after it started
    FAILURES = "failures"  # maxConsecutiveFailures runs in a row failed
    FORECAST = "forecast"  # the capacity forecast predicts the next instant will start late


class Incident(models.Model):
    """A breach of a schedule's expectations, opened and resolved by the health evaluation
    (runs.health) on database time. Any number of evaluators may run: the unique keys make
    one incident of one breach, and at most one open incident per schedule and kind."""

    id = models.CharField(primary_key=True, max_length=40, default=new_incident_id, editable=False)
    tenant = models.ForeignKey("schedules.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    schedule = models.ForeignKey("schedules.Schedule", on_delete=models.CASCADE, related_name="incidents",
                                 db_index=False)
    kind = models.CharField(max_length=12, choices=IncidentKind.choices)
    # What was breached, within the schedule and kind: the instant of a late or forecast
    # occurrence, the long run's id, the first run of a failure streak. One incident each.
    breach_key = models.CharField(max_length=120)
    # The occurrence concerned (none when it was never materialized); no constraint: retention
    # may delete the run while its incident stays readable.
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False,
                            related_name="+")
    instant = models.DateTimeField(null=True, blank=True)  # that occurrence's instant
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    # recovered, instant_passed, expectation_removed, schedule_deleted
    resolution = models.CharField(max_length=24, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "kind"], condition=Q(resolved_at__isnull=True),
                                    name="incident_one_open"),
            models.UniqueConstraint(fields=["schedule", "kind", "breach_key"], name="incident_one_per_breach"),
            models.CheckConstraint(condition=Q(resolved_at__isnull=True) | Q(resolved_at__gte=models.F("opened_at")),
                                   name="incident_resolved_after_opened"),
        ]
        indexes = [
            # GET /incidents pages a tenant's incidents newest first.
            models.Index(fields=["tenant", "-opened_at", "-id"], name="incident_tenant_idx"),
            # The open ones: the evaluation's resolutions, the gauge, a schedule's health.
            models.Index(fields=["tenant", "kind"], name="incident_open_idx", condition=Q(resolved_at__isnull=True)),
        ]

    def __str__(self):
        return f"{self.kind} {self.schedule_id} ({self.id})"


def new_effect_id():
    return new_id("eff")


class EffectKind(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"


class EffectState(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    UNCERTAIN = "uncertain"  # the request may have reached the provider; outcome unknown
    FAILED = "failed"
    SKIPPED = "skipped"


class EffectIntent(models.Model):
    """Created only by a committed canonical publication, in the same transaction; or, with
    `alert` and no run, by a health alert digest (effects.alerts), with its notices. A record of
    the authority's, delivered by effects.delivery; its table keeps the name it was created with."""

    id = models.CharField(primary_key=True, max_length=40, default=new_effect_id, editable=False)
    action = models.CharField(max_length=120, unique=True)
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="effect_intents")
    # A health alert: {"tenantId", "incidents": [{"incidentId", "event", ...}, ...]}, what the
    # message lists, fixed when the intent is created so every delivery says the same.
    alert = models.JSONField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=EffectKind.choices)
    target = models.JSONField(default=dict)
    result_key = models.CharField(max_length=500)
    result_version_id = models.CharField(max_length=200, null=True, blank=True)
    result_checksum = models.CharField(max_length=71)
    state = models.CharField(max_length=10, choices=EffectState.choices, default=EffectState.PENDING)
    external_id = models.CharField(max_length=300, blank=True, default="")
    delivery_count = models.PositiveIntegerField(default=0)
    # Pending: when the next delivery may start (null = now). While a delivery is in flight it
    # is that delivery's deadline. Uncertain: set only under the `retry` policy; null = held.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # An operator's decision (admin action or `manage.py effects resolve`), with who and when.
    resolution = models.TextField(blank=True, default="")
    # Why a failed intent was refused without any request: egress_denied, quota_exceeded.
    reason = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "effects_effectintent"
        constraints = [
            models.CheckConstraint(condition=Q(run__isnull=False) | Q(alert__isnull=False),
                                   name="effect_run_or_alert"),
        ]
        # The two probes of claim_next_delivery: undated pending intents (due now), then dated
        # ones by due time. Settled and held intents are in neither.
        indexes = [
            models.Index(
                fields=["created_at", "id"],
                name="effect_undated_idx",
                condition=Q(state="pending", next_attempt_at__isnull=True),
            ),
            models.Index(
                fields=["next_attempt_at", "created_at", "id"],
                name="effect_dated_idx",
                condition=Q(state__in=["pending", "uncertain"], next_attempt_at__isnull=False),
            ),
            # Open intents only: the scheduler_effects gauge counts them by state at every scrape,
            # and the console's uncertain queue pages them by (created_at, id).
            models.Index(
                fields=["state", "created_at", "id"],
                name="effect_open_idx",
                condition=Q(state__in=["pending", "uncertain"]),
            ),
        ]

    def __str__(self):
        return self.action


class EffectDelivery(models.Model):
    """One provider request and its outcome. Written and committed before the request is
    made, so a delivery left unfinished is evidence that its outcome is unknown."""

    intent = models.ForeignKey(EffectIntent, on_delete=models.CASCADE, related_name="deliveries")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=EffectState.choices, default=EffectState.PENDING)
    external_id = models.CharField(max_length=300, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    # What was submitted: identity (Message-ID / Idempotency-Key), recipients or endpoint,
    # attachment or link. Never the signed link itself.
    request = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "effects_effectdelivery"
        constraints = [
            models.UniqueConstraint(fields=["intent", "number"], name="effectdelivery_number_unique")
        ]
