"""Materialization: due instants become occurrences, in the transaction that advances the rule."""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from schedules import recurrence
from schedules.models import JobType, OverlapPolicy, Schedule, ScheduleRevision
from runs.authority.transitions import dispatch_row
from runs.catch_up import plan_catch_up
from runs import metrics
from runs.bulk import bulk_insert, bulk_set
from runs.clock import authority_now
from runs.counts import Counts
from runs.models import ACTIVE_STATES, Outbox, PendingReason, Run, RunState, SkipReason, Trigger, new_run_id
from scheduler_project.failpoints import failpoint


@dataclass
class MaterializeStats(Counts):
    schedules: int = 0
    queued: int = 0
    pending: int = 0
    skipped: int = 0


# What materialization reads of a schedule; params and effects come from the revision row.
MATERIALIZE_FIELDS = (
    "id", "tenant_id", "job_type_id", "recurrence", "revision", "misfire_policy", "misfire_grace_seconds",
    "overlap_policy", "next_run_at", "active_run_id", "resume_from",
)


def materialize_due(*, batch_size: int | None = None, buckets=None) -> MaterializeStats:
    """One transaction: lock a batch of due schedules (skipping locked ones), insert their
    occurrences and dispatch intents, advance next_run_at. Any number of scanners may run."""
    batch_size = batch_size or settings.SCAN_BATCH_SIZE
    with transaction.atomic():
        due = Schedule.objects.filter(
            next_run_at__isnull=False, next_run_at__lte=authority_now(), paused=False, deleted_at__isnull=True
        )
        if buckets is not None:
            due = due.filter(bucket__in=list(buckets))
        schedules = list(
            due.select_for_update(skip_locked=True).order_by("next_run_at").only(*MATERIALIZE_FIELDS)[:batch_size]
        )
        if not schedules:
            return MaterializeStats()
        now = authority_now()
        stats = _materialize(schedules, now)
    metrics.MATERIALIZED.inc(stats.queued + stats.pending)
    failpoint("after_materialize_commit")
    return stats


def catch_up_on_resume(schedule: Schedule, now) -> MaterializeStats:
    """Apply the misfire policy to the instants missed while paused (schedule is locked)."""
    return _materialize([schedule], now, from_pause=True)


def _materialize(schedules: list[Schedule], now, *, from_pause=False) -> MaterializeStats:
    stats = MaterializeStats(schedules=len(schedules))
    job_types = {jt.name: jt for jt in JobType.objects.filter(name__in={s.job_type_id for s in schedules})}
    revisions = _current_payloads(schedules)
    waiting = _waiting_counts(schedules)

    runs: list[dict] = []
    outbox: list[dict] = []
    rules: dict[tuple, recurrence.Rule] = {}  # a wave shares few distinct rules
    for schedule in schedules:
        key = tuple(sorted(schedule.recurrence.items()))
        rule = rules.get(key) or rules.setdefault(key, recurrence.parse_rule(schedule.recurrence))
        first_due = schedule.resume_from if from_pause else schedule.next_run_at
        if first_due is None:
            continue
        plan = plan_catch_up(
            rule,
            first_due,
            now,
            policy=schedule.misfire_policy,
            grace_seconds=schedule.misfire_grace_seconds,
            all_missed=from_pause,
        )
        payload = run_payload(revisions[schedule.id], job_types[schedule.job_type_id])
        base = {
            "schedule_id": schedule.id,
            "tenant_id": schedule.tenant_id,
            "trigger": Trigger.SCHEDULE,
            "revision": schedule.revision,
            "payload": payload,
            "job_type": schedule.job_type_id,
            "resource_class": payload["resourceClass"],
            "max_attempts": payload["retry"]["maxAttempts"],
            "created_at": now,
        }
        skipped = dict(base, state=RunState.SKIPPED, skip_reason=SkipReason.MISFIRE, finished_at=now)
        if plan.skipped_range:
            span = plan.skipped_range
            runs.append(dict(skipped, id=new_run_id(), scheduled_at=span.first, due_at=span.first,
                             skipped_count=span.count, skipped_through=span.last))
            stats.skipped += span.count
            metrics.SKIPPED.labels("misfire").inc(span.count)
        for instant in plan.skipped:
            runs.append(dict(skipped, id=new_run_id(), scheduled_at=instant, due_at=instant))
        stats.skipped += len(plan.skipped)
        metrics.SKIPPED.labels("misfire").inc(len(plan.skipped))

        holder = schedule.active_run_id is not None
        policy = schedule.overlap_policy
        for instant in plan.run:
            run = dict(base, id=new_run_id(), scheduled_at=instant, due_at=instant)
            waiters = waiting.get(schedule.id, 0)
            if policy == OverlapPolicy.ALLOW or not (waiters or holder):
                run["state"] = RunState.QUEUED
                run["dispatch_count"] = 1
                outbox.append(dispatch_row(run["id"], 1, run["resource_class"], now))
                stats.queued += 1
            elif waiters or policy == OverlapPolicy.SKIP:
                run.update(state=RunState.SKIPPED, skip_reason=SkipReason.OVERLAP, finished_at=now)
                stats.skipped += 1
                metrics.SKIPPED.labels("overlap").inc()
            else:
                run.update(state=RunState.PENDING, pending_reason=PendingReason.OVERLAP)
                stats.pending += 1
            if run["state"] != RunState.SKIPPED:
                waiting[schedule.id] = waiters + 1
            runs.append(run)
        schedule.next_run_at = plan.next_run_at
        if rule.kind == "after_completion" and plan.run:
            schedule.next_run_at = None  # the next one is due when this one ends
        schedule.updated_at = now

    bulk_insert(Run, runs)
    bulk_insert(Outbox, outbox)
    if not from_pause:
        bulk_set(schedules, ["next_run_at", "updated_at"])
    return stats


def _current_payloads(schedules: list[Schedule]) -> dict[str, dict]:
    wanted = {(s.id, s.revision) for s in schedules}
    rows = ScheduleRevision.objects.filter(schedule_id__in=[s.id for s in schedules]).values_list(
        "schedule_id", "revision", "payload"
    )
    return {sid: payload for sid, rev, payload in rows if (sid, rev) in wanted}


def _waiting_counts(schedules: list[Schedule]) -> dict[str, int]:
    """Active occurrences not holding the guard, per schedule: the overlap policy's queue."""
    exclusive = [s.id for s in schedules if s.overlap_policy != OverlapPolicy.ALLOW]
    counts: dict[str, int] = {}
    for schedule_id in Run.objects.filter(
        schedule_id__in=exclusive, state__in=ACTIVE_STATES, holds_guard=False
    ).values_list("schedule_id", flat=True):
        counts[schedule_id] = counts.get(schedule_id, 0) + 1
    return counts


def run_payload(revision_payload: dict, job_type: JobType) -> dict:
    """The snapshot every attempt of an occurrence executes, whatever later edits do."""
    return {
        "jobType": job_type.name,
        "params": revision_payload["params"],
        "paramsSchemaVersion": job_type.params_schema_version,
        "resourceClass": job_type.resource_class,
        "leaseSeconds": job_type.default_lease_seconds,
        "timeoutSeconds": job_type.timeout_seconds,
        "retry": revision_payload["retry"],
        "effects": revision_payload.get("effects") or {},
        "scheduleName": revision_payload.get("name", ""),
    }
