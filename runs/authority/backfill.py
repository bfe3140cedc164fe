"""Backfill: the occurrences of a past range of a schedule's rule, for re-running a report
of a missed period. Each instant is created at most once (the unique key of a scheduled
instant: run_one_per_instant), so a repeated request creates nothing new; they wait as
pending (reason backfill) and the scanner releases at most BACKFILL_PER_CYCLE of each
schedule per scan cycle, like a run_all catch-up. Until claimed they count against the
tenant's quota of requested work, as manual runs do."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from runs.authority.materialize import run_payload
from runs.authority.operations import check_requested_work_quota, require_available
from runs.authority.statements.rows import bulk_set
from runs.authority.finish_and_dispatch import dispatch_intent
from runs.catch_up import RUN_ALL_PER_CYCLE
from runs.models import Outbox, PendingReason, Run, RunState, Trigger
from schedules import recurrence
from runs.authority.locks import lock_schedule, lock_tenant_quota
from schedules.models import JobType, ScheduleRevision
from schedules.selectors import schedule_rule
from kernel.clock import authority_now
from kernel.errors import InvalidRequest, InvalidState

MAX_BACKFILL_INSTANTS = 1000
BACKFILL_PER_CYCLE = RUN_ALL_PER_CYCLE


@dataclass(frozen=True)
class Backfilled:
    instants: int  # the rule's instants in the range
    created: int  # occurrences created by this request
    existing: int  # instants that already had their occurrence


def schedule_backfill(*, tenant, schedule_id: str, start: datetime, end: datetime) -> Backfilled:
    """Create the occurrences of the rule's instants in [start, end), which must have passed."""
    if end <= start:
        raise InvalidRequest("to must be after from", field="to")
    with transaction.atomic(durable=True):
        limit = lock_tenant_quota(tenant)
        schedule = lock_schedule(schedule_id, tenant=tenant)
        now = authority_now()
        if end > now:
            raise InvalidRequest("to must not be in the future: backfill creates past occurrences", field="to")
        # The window holds for backfilled instants too (they are not counted by endAfterOccurrences).
        # The schedule's calendars hold too: an excluded instant is no occurrence to backfill.
        rule = schedule_rule(schedule) or recurrence.parse_rule(
            schedule.recurrence, default_anchor=schedule.created_at).within(schedule.active_from, schedule.active_until)
        if rule.kind == "after_completion":
            raise InvalidState("an after_completion schedule has no instants of its own to backfill")
        if schedule.paused:
            raise InvalidState("a paused schedule is backfilled after it resumes")
        # From its next instant on, the scanner creates the occurrences (misfire catch-up
        # included): a backfill stops before it, so the two never write the same instant. A rule
        # without a next instant (a `once` that has passed) leaves the scanner nothing to write.
        if schedule.next_run_at is not None:
            end = min(end, schedule.next_run_at)
        tick = timedelta(microseconds=1)
        instants = recurrence.instants_between(rule, start - tick, end - tick, MAX_BACKFILL_INSTANTS + 1) if end > start else []
        if len(instants) > MAX_BACKFILL_INSTANTS:
            raise InvalidRequest(
                f"the range holds more than {MAX_BACKFILL_INSTANTS} instants; backfill it in parts",
                field="to", details={"limit": MAX_BACKFILL_INSTANTS},
            )
        existing = set(
            Run.objects.filter(schedule=schedule, trigger=Trigger.SCHEDULE, scheduled_at__in=instants)
            .values_list("scheduled_at", flat=True)
        )
        job_type = JobType.objects.get(name=schedule.job_type_id)
        require_available(job_type)
        revision = ScheduleRevision.objects.get(schedule=schedule, revision=schedule.revision)
        payload = run_payload(revision.payload, job_type)
        rows = [
            Run(schedule=schedule, tenant_id=schedule.tenant_id, trigger=Trigger.SCHEDULE, backfilled=True,
                revision=schedule.revision, payload=payload, job_type=job_type.name,
                resource_class=payload["resourceClass"], max_attempts=payload["retry"]["maxAttempts"],
                state=RunState.PENDING, pending_reason=PendingReason.BACKFILL, scheduled_at=at, due_at=at,
                created_at=now)
            for at in instants if at not in existing
        ]
        if rows:
            check_requested_work_quota(tenant, limit, adding=len(rows))
        Run.objects.bulk_create(rows, ignore_conflicts=True)  # the unique key keeps each instant once
    return Backfilled(len(instants), len(rows), len(existing))


def release_backfill(*, per_schedule: int = BACKFILL_PER_CYCLE) -> int:
    """One scan cycle's release: up to `per_schedule` backfilled occurrences of each schedule,
    oldest first, become claimable with their dispatch intents."""
    with transaction.atomic(durable=True):
        now = authority_now()
        waiting = Run.objects.filter(  # a paused or deleted schedule's backfill waits
            state=RunState.PENDING, pending_reason=PendingReason.BACKFILL,
            schedule__paused=False, schedule__deleted_at__isnull=True,
        )
        released = []
        for schedule_id in waiting.values_list("schedule_id", flat=True).distinct().order_by("schedule_id"):
            released += list(
                waiting.filter(schedule_id=schedule_id).order_by("scheduled_at")
                .select_for_update(skip_locked=True)[:per_schedule]
            )
        outbox = []
        for run in released:
            run.state, run.pending_reason = RunState.QUEUED, PendingReason.NONE
            outbox.append(dispatch_intent(run, now))
        bulk_set(Run, released, ["state", "pending_reason", "dispatch_count"])
        Outbox.objects.bulk_create(outbox)
    return len(released)
