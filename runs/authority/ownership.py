"""Ownership of a running occurrence: whether an attempt still owns it, and the heartbeat
that extends its lease. Both judge by authority time, never by a worker's clock."""

from django.db import connection, transaction

from runs import metrics
from runs.authority.sql import extend_leases, transition
from runs.authority.transitions import lease_until
from scheduler_project.clock import authority_now
from runs.models import Attempt, AttemptState, Run, RunState
from scheduler_project.errors import NotFound, StaleFence


def heartbeat(*, run_id: str, attempt_id: str, fence: int) -> Run:
    """Extend the lease of the current attempt; a passed lease cannot be revived."""
    with metrics.counting_stale("heartbeat"), transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("no such run")
        _extend(run, attempt_id, fence)
        return run


def heartbeat_many(held: list[tuple[str, int]]) -> dict[str, bool]:
    """One process's heartbeat for every attempt it holds, ``(attempt id, fence)``, in one
    transaction: the cost is per process and interval, not per attempt. Returns ``{attempt
    id: cancellation requested}`` for the attempts that still own their run; the others
    have lost it."""
    if not held:
        return {}
    with transaction.atomic(durable=True):
        if connection.vendor == "postgresql":
            alive = extend_leases(held)
        else:
            runs = {r.current_attempt_id: r for r in Run.objects.select_for_update().filter(
                current_attempt_id__in=[a for a, _ in held])}
            alive = {}
            for attempt_id, fence in held:
                try:
                    _extend(runs[attempt_id], attempt_id, fence)
                except (KeyError, StaleFence, NotFound):
                    continue
                alive[attempt_id] = runs[attempt_id].cancellation_requested
    return alive


def _extend(run: Run, attempt_id: str, fence: int) -> None:
    now = authority_now()
    attempt = current_attempt(run, attempt_id, fence, now)
    until = lease_until(now, attempt.lease_seconds)
    transition(run, {"state": RunState.RUNNING, "fence": fence}, lease_expires_at=until)
    transition(attempt, {"state": AttemptState.RUNNING}, lease_expires_at=until)


def current_attempt(run: Run, attempt_id: str, fence: int, now) -> Attempt:
    """The attempt if it owns the run at authority time ``now``; StaleFence otherwise."""
    attempt = Attempt.objects.filter(id=attempt_id, run=run).first()
    if attempt is None:
        raise NotFound("no such attempt")
    require_current(run, attempt, fence, now)
    return attempt


def require_current(run: Run, attempt: Attempt, fence: int, now) -> None:
    """Ownership check: latest fence, running attempt, lease not passed (authority time)."""
    if (
        run.state != RunState.RUNNING
        or run.current_attempt_id != attempt.id
        or run.fence != fence
        or attempt.fence != fence
        or attempt.state != AttemptState.RUNNING
    ):
        raise StaleFence("fence is no longer current", details={"currentFence": run.fence})
    if run.lease_expires_at <= now:
        raise StaleFence("lease has expired", details={"currentFence": run.fence})
