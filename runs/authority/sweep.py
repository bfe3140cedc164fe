"""Lease expiry: a passed lease ends its attempt, and the run is re-queued or finished."""

from django.db import transaction
from django.db.models import Q

from schedules.models import Schedule
from runs import metrics
from runs.authority.statements.dialect import checked_q
from runs.authority.completion import fail_or_retry
from runs.authority.statements.rows import transition
from runs.authority.finish_and_dispatch import dispatch_intent, finish_run
from kernel.clock import authority_now
from runs.models import AttemptReason, AttemptState, Outbox, Run, RunState


def sweep_expired_leases(*, batch_size: int = 500) -> int:
    """Expire passed leases: the run is re-queued with a fresh dispatch intent, or ends if
    its attempts are used up or cancellation was requested. A lease that passed at its
    attempt's deadline is a timeout: the attempt failed (reason timeout), retried with the
    run's backoff. Returns runs swept."""
    with transaction.atomic(durable=True):
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
                checked_q(Q(state=RunState.RUNNING, lease_expires_at__lte=now)),  # found by id, not by state
                id__in=[rid for rid, sid in expired if sid in schedules],
            )
            .select_related("current_attempt")
            .select_for_update(skip_locked=True, of=("self",))
        )
        now = authority_now()
        outbox = []
        for run in runs:
            if run.lease_expires_at > now:
                continue
            attempt, schedule = run.current_attempt, schedules[run.schedule_id]
            if attempt.deadline_at is not None and attempt.deadline_at <= now:
                # Its lease ended because the job ran past its timeout (leases.lease_until),
                # and nobody recorded it: a worker ended hard, or whose clock lags.
                error = f"timed out after {run.payload.get('timeoutSeconds', 0):g}s (lease ended at the timeout)"
                transition(attempt, {"state": AttemptState.RUNNING}, state=AttemptState.FAILED, finished_at=now,
                           error=error, retryable=True, reason=AttemptReason.TIMEOUT)
                outbox += fail_or_retry(schedule, run, now, error, True)
                continue
            transition(
                attempt, {"state": AttemptState.RUNNING},
                state=AttemptState.EXPIRED, finished_at=now, expired_at=now, error="lease expired",
            )
            if run.cancellation_requested:
                outbox += finish_run(schedule, run, RunState.CANCELED, now, cancellation_accepted=True)
            elif run.attempt_count >= run.max_attempts:
                outbox += finish_run(schedule, run, RunState.FAILED, now, error="lease expired; attempts exhausted")
            else:
                outbox.append(dispatch_intent(run, now))
                transition(
                    run, {"state": RunState.RUNNING},
                    state=RunState.QUEUED, due_at=now, lease_expires_at=None, dispatch_count=run.dispatch_count,
                )
        Outbox.objects.bulk_create(outbox)
    metrics.EXPIRED_LEASES.inc(len(runs))
    return len(runs)
