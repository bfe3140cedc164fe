"""Client operations on occurrences: run once, cancel, replay, release, and promotion of due pending runs."""

from datetime import datetime

from django.db import transaction
from django.db.models import Q

from schedules.audit import UNNAMED_API, Actor, audit_record
from schedules.models import AuditAction, JobType, RequestKey, ScheduleRevision
from schedules.celery_task_allowlist import check_celery_task_allowed
from schedules.specs import validate_params
from runs.authority.locks import lock_schedule, lock_schedule_then_run, lock_tenant_quota
from runs.authority.materialize import run_payload
from runs.authority.finish_and_dispatch import dispatch_intent, finish_run
from runs.overlap import Step, admit
from runs.authority.statements.rows import bulk_set, transition
from kernel.clock import authority_now, instant
from runs.models import REQUESTED, Outbox, PendingReason, Run, RunState, TERMINAL_STATES, Trigger
from kernel.errors import IdempotencyConflict, InvalidState, JobTypeUnavailable, QuotaExceeded


def run_once(
    *, tenant, schedule_id: str, params: dict | None = None, run_at: datetime | None = None,
    idempotency_key: str | None = None, request_hash: str = "",
) -> tuple[Run, bool]:
    """Create one manual occurrence (`params` over the schedule's, due at `run_at` or now);
    the same key returns the same run if `request_hash` matches the request that carried it.
    Past the tenant's quota of manual runs waiting (maxPendingManualRuns): QuotaExceeded,
    nothing created."""
    with transaction.atomic(durable=True):
        limit = lock_tenant_quota(tenant)
        schedule = lock_schedule(schedule_id, tenant=tenant)
        job_type = JobType.objects.get(name=schedule.job_type_id)
        params = {**schedule.params, **(params or {})}
        validate_params(job_type, params)
        check_celery_task_allowed(tenant, job_type.name, params)
        scope = f"runs:{schedule.id}"
        if idempotency_key:
            previous = RequestKey.objects.filter(tenant=tenant, scope=scope, key=idempotency_key).first()
            if previous is not None:
                if previous.request_hash != request_hash:
                    raise IdempotencyConflict("this Idempotency-Key was used with a different request")
                return Run.objects.get(id=previous.resource_id), False
        require_available(job_type)  # after the replay: an accepted request keeps its answer
        check_requested_work_quota(tenant, limit, adding=1, waiting=Q(trigger=Trigger.MANUAL))
        now = authority_now()
        revision = ScheduleRevision.objects.get(schedule=schedule, revision=schedule.revision)
        payload = run_payload({**revision.payload, "params": params}, job_type)
        due = run_at or now
        run = Run(
            schedule=schedule,
            tenant=tenant,
            trigger=Trigger.MANUAL,
            revision=schedule.revision,
            payload=payload,
            job_type=job_type.name,
            resource_class=job_type.resource_class,
            max_attempts=payload["retry"]["maxAttempts"],
            scheduled_at=due,
            due_at=due,
            created_at=now,
            state=RunState.QUEUED if due <= now else RunState.PENDING,
            pending_reason=PendingReason.NONE if due <= now else PendingReason.NOT_DUE,
        )
        outbox = dispatch_intent(run, now) if run.state == RunState.QUEUED else None
        run.save(force_insert=True)
        if outbox:
            outbox.save()
        if idempotency_key:
            RequestKey.objects.create(
                tenant=tenant, scope=scope, key=idempotency_key, request_hash=request_hash, resource_id=run.id
            )
        return run, True


def require_available(job_type: JobType) -> None:
    """New work of a job type whose declaration is gone is refused (JobTypeUnavailable): such
    a run would wait for a worker that cannot run it."""
    if not job_type.enabled:
        raise JobTypeUnavailable(
            f"job type {job_type.name!r} has no declaration any more: no worker can run it until it is declared "
            f"again (SCHEDULER_JOB_MODULES)", details={"jobType": job_type.name},
        )


def check_requested_work_quota(tenant, limit: int, *, adding: int, waiting: Q = REQUESTED) -> None:
    """The tenant (locked by runs.authority.locks.lock_tenant_quota) may hold at most `limit`
    (maxPendingManualRuns) runs of `waiting` not yet claimed: QuotaExceeded when `adding` more
    would pass it. A run once counts the manual runs waiting, as the contract says; a
    backfill counts them and the backfilled ones (models.REQUESTED), so it never takes the
    tenant's requested work past the quota."""
    held = Run.objects.filter(waiting, tenant=tenant, state__in=(RunState.PENDING, RunState.QUEUED))[:limit].count()
    if held + adding > limit:  # counted no further than the limit
        raise QuotaExceeded(
            f"tenant has {held} runs waiting to be claimed and asked for {adding} more; its quota is {limit}",
            details={"quota": "maxPendingManualRuns", "limit": limit},
        )


def run_cancel(*, tenant, run_id: str) -> Run:
    """Not started: canceled now. Running: cancellation requested, accepted when the worker
    completes with outcome canceled or its lease ends. Terminal: InvalidState."""
    with transaction.atomic(durable=True):
        schedule, run = lock_schedule_then_run(run_id, tenant=tenant)
        if run.state in TERMINAL_STATES:
            raise InvalidState(f"run is already {run.state}")
        now = authority_now()
        if run.state == RunState.RUNNING:
            if not run.cancellation_requested:
                transition(run, {"state": RunState.RUNNING}, cancellation_requested=True)
            return run
        outbox = finish_run(
            schedule, run, RunState.CANCELED, now, cancellation_requested=True, cancellation_accepted=True
        )
        Outbox.objects.bulk_create(outbox)
        return run


MAX_REPLAYS = 100  # per run: each is a record on the run


def run_replay(*, tenant, run_id: str, note: str = "", actor: str = "") -> Run:
    """A failed run runs again: the same occurrence (its id, payload and so its effects'
    identities, send-<runId>) is queued for a new attempt, which its claim gives a higher
    fence, with a fresh retry budget (the payload's maxAttempts more attempts). The replay is
    recorded on the run (``replays``: when, who, the note, the attempts it had). A run in any
    other state, or of a deleted schedule: InvalidState; a job type with no declaration:
    JobTypeUnavailable. Its canonical result is still written once, by the attempt whose
    completion wins (a failed run has none)."""
    with transaction.atomic(durable=True):
        schedule, run = lock_schedule_then_run(run_id, tenant=tenant)
        if run.state != RunState.FAILED:
            raise InvalidState(f"only a failed run can be replayed; this one is {run.state}")
        if schedule.deleted_at is not None:
            raise InvalidState("the run's schedule is deleted")
        replays = list(run.replays or [])
        if len(replays) >= MAX_REPLAYS:
            raise InvalidState(f"this run was replayed {len(replays)} times, the most a run may be")
        require_available(JobType.objects.get(name=run.job_type))
        now = authority_now()
        replays.append({"at": instant(now), "actor": actor, "note": note, "afterAttempt": run.attempt_count})
        budget = int((run.payload.get("retry") or {}).get("maxAttempts") or 1)
        outbox = dispatch_intent(run, now)
        transition(
            run, {"state": RunState.FAILED},
            state=RunState.QUEUED, pending_reason=PendingReason.NONE, due_at=now, finished_at=None, error="",
            max_attempts=run.attempt_count + budget, cancellation_requested=False, cancellation_accepted=False,
            dispatch_count=run.dispatch_count, replays=replays,
        )
        outbox.save()
        return run


def run_release(*, tenant, run_id: str, actor: Actor = UNNAMED_API) -> Run:
    """A held run (a hold directive) is admitted as if it had just been materialized
    without one: queued with a dispatch intent (pending until its jittered due time), or
    waiting for its schedule's guard under its overlap policy. Any other run: InvalidState."""
    with transaction.atomic(durable=True):
        schedule, run = lock_schedule_then_run(run_id, tenant=tenant)
        if run.state != RunState.PENDING or run.pending_reason != PendingReason.HELD:
            raise InvalidState(f"only a held run can be released; this one is {run.state}")
        now = authority_now()
        held = {"state": RunState.PENDING, "pending_reason": PendingReason.HELD}
        if admit(schedule.overlap_policy, guard=schedule.active_run_id, run_id=run.id, new=False) is Step.WAIT:
            transition(run, held, pending_reason=PendingReason.OVERLAP)
        elif run.due_at > now:
            transition(run, held, pending_reason=PendingReason.NOT_DUE)
        else:
            outbox = dispatch_intent(run, now)
            transition(run, held, state=RunState.QUEUED, pending_reason=PendingReason.NONE,
                       dispatch_count=run.dispatch_count)
            outbox.save()
        audit_record(schedule, actor=actor, action=AuditAction.RELEASE, at=now, runId=run.id,
                     instant=instant(run.scheduled_at))
        return run


def attempts_since_replay(run: Run) -> int:
    """The run's attempts since its last replay (all of them if never replayed): what its
    retry backoff counts."""
    return run.attempt_count - (run.replays[-1]["afterAttempt"] if run.replays else 0)


def promote_due_runs(*, batch_size: int = 1000) -> int:
    """Pending runs whose due time or retry delay has passed become queued, with a dispatch intent."""
    with transaction.atomic(durable=True):
        now = authority_now()
        runs = list(
            Run.objects.filter(
                state=RunState.PENDING,
                pending_reason__in=[PendingReason.NOT_DUE, PendingReason.RETRY],
                due_at__lte=now,
            )
            .order_by("due_at")
            .select_for_update(skip_locked=True)[:batch_size]
        )
        outbox = []
        for run in runs:
            run.state = RunState.QUEUED
            run.pending_reason = PendingReason.NONE
            outbox.append(dispatch_intent(run, now))
        bulk_set(Run, runs, ["state", "pending_reason", "dispatch_count"])
        Outbox.objects.bulk_create(outbox)
        return len(runs)

