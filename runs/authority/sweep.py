"""Lease expiry: a passed lease ends its attempt, and the run is re-queued or finished."""

from django.db import transaction

from schedules.models import Schedule
from runs import metrics
from runs.authority.transitions import dispatch_intent, finish_run
from runs.clock import authority_now
from runs.models import Attempt, AttemptState, Outbox, Run, RunState


def sweep_expired_leases(*, batch_size: int = 500) -> int:
    """Expire passed leases: the run is re-queued with a fresh dispatch intent, or ends if
    its attempts are used up or cancellation was requested. Returns runs swept."""
    with transaction.atomic():
        now = authority_now()
        expired = list(
            Run.objects.filter(state=RunState.RUNNING, lease_expires_at__lte=now)
            .order_by("lease_expires_at")
            .values_list("id", "schedule_id")[:batch_size]
        )
        if not expired:
            return 0
        # Schedule, then run, both SKIP LOCKED: a run being completed right now is left alone.
        schedules = {
            s.id: s
            for s in Schedule.objects.filter(id__in={sid for _, sid in expired}).select_for_update(skip_locked=True)
        }
        runs = list(
            Run.objects.filter(
                id__in=[rid for rid, sid in expired if sid in schedules],
                state=RunState.RUNNING,
                lease_expires_at__lte=now,
            ).select_for_update(skip_locked=True)
        )
        now = authority_now()
        outbox = []
        for run in runs:
            if run.lease_expires_at > now:
                continue
            Attempt.objects.filter(id=run.current_attempt_id, state=AttemptState.RUNNING).update(
                state=AttemptState.EXPIRED, finished_at=now, error="lease expired"
            )
            schedule = schedules[run.schedule_id]
            if run.cancellation_requested:
                run.cancellation_accepted = True
                outbox += finish_run(schedule, run, RunState.CANCELED, now)
            elif run.attempt_count >= run.max_attempts:
                outbox += finish_run(schedule, run, RunState.FAILED, now, error="lease expired; attempts exhausted")
            else:
                run.state = RunState.QUEUED
                run.due_at = now
                run.lease_expires_at = None
                outbox.append(dispatch_intent(run, now))
                run.save(update_fields=["state", "due_at", "lease_expires_at", "dispatch_count"])
        Outbox.objects.bulk_create(outbox)
    metrics.EXPIRED_LEASES.inc(len(runs))
    return len(runs)
