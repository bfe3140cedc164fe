"""Ownership of a running occurrence: whether an attempt still owns it, and the heartbeat
that extends its lease. Both judge by authority time, never by a worker's clock."""

from django.db import transaction

from runs import metrics
from runs.authority.leases import attempt_deadline, lease_until
from runs.authority.owner import require_current
from runs.authority.statements import dialect
from runs.authority.statements.attempts import attempts_extend_leases_if_owned
from runs.authority.statements.rows import transition
from runs.authority.statements.runs import runs_exist_if_owned
from kernel.clock import authority_now
from runs.models import Attempt, AttemptState, Run, RunState
from kernel.errors import Forbidden, NotFound, StaleFence


def heartbeat(*, run_id: str, attempt_id: str, fence: int, worker_token=None) -> Run:
    """Extend the lease of the current attempt; a passed lease cannot be revived. Over HTTP
    ``worker_token`` is the caller's credential, which must be the one that claimed."""
    with metrics.counting_stale("heartbeat"), transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("no such run")
        _extend(run, attempt_id, fence, worker_token)
        return run


def restart_deadline(*, run_id: str, attempt_id: str, fence: int) -> None:
    """The job of an attempt claimed a while ago (behind others of its batch) starts now: its
    deadline counts again from now, on database time, and its lease is extended under it
    (leases.lease_until), so the job has its whole timeout and the authority still
    bounds it. StaleFence when the attempt no longer owns the run: a passed lease (one that
    waited past its claim's deadline) is not revived."""
    with metrics.counting_stale("heartbeat"), transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("no such run")
        now = authority_now()
        attempt = current_attempt(run, attempt_id, fence, now, operation="heartbeat")
        deadline = attempt_deadline(now, run.payload)
        until = lease_until(now, attempt.lease_seconds, deadline)
        transition(run, {"state": RunState.RUNNING, "fence": fence}, lease_expires_at=until)
        transition(attempt, {"state": AttemptState.RUNNING}, deadline_at=deadline, lease_expires_at=until)


def still_owns(*, run_id: str, attempt_id: str, fence: int) -> bool:
    """Whether the attempt owns its run now (owner.owns_filter, on database time): one read
    by primary key and no lock, for a job about to act where no fence can guard its write
    (JobContext.still_owner)."""
    return runs_exist_if_owned(run_id=run_id, attempt_id=attempt_id, fence=fence)


def heartbeat_many(held: list[tuple[str, int]]) -> dict[str, bool]:
    """One process's heartbeat for every attempt it holds, ``(attempt id, fence)``, in one
    transaction: the cost is per process and interval, not per attempt. Returns ``{attempt
    id: cancellation requested}`` for the attempts that still own their run; the others
    have lost it."""
    if not held:
        return {}
    with transaction.atomic(durable=True):
        if dialect.postgresql():
            alive = attempts_extend_leases_if_owned(held)
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


def _extend(run: Run, attempt_id: str, fence: int, worker_token=None) -> None:
    now = authority_now()
    attempt = current_attempt(run, attempt_id, fence, now, worker_token=worker_token, operation="heartbeat")
    until = lease_until(now, attempt.lease_seconds, attempt.deadline_at)
    transition(run, {"state": RunState.RUNNING, "fence": fence}, lease_expires_at=until)
    transition(attempt, {"state": AttemptState.RUNNING}, lease_expires_at=until)


def current_attempt(run: Run, attempt_id: str, fence: int, now, *, worker_token=None, operation: str = "") -> Attempt:
    """The attempt if it owns the run at authority time ``now``: Forbidden for another
    worker's credential, StaleFence for a fence or lease that is no longer current."""
    attempt = Attempt.objects.filter(id=attempt_id, run=run).first()
    if attempt is None:
        raise NotFound("no such attempt")
    require_credential(attempt, worker_token, operation)
    require_current(run, attempt, fence, now)
    return attempt


def require_credential(attempt: Attempt, worker_token, operation: str) -> None:
    """An attempt belongs to the worker credential that claimed it. ``worker_token`` None
    is an in-process worker of this deployment (the embedded pool, Celery workers)."""
    if worker_token is not None and attempt.worker_token_id != worker_token.id:
        metrics.CREDENTIAL_REFUSALS.labels(operation).inc()
        raise Forbidden("this attempt belongs to another worker credential")

