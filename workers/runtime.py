"""The worker runtime: execute one claimed run and report its outcome to the authority.

The runtime never changes run state itself and never decides ownership by its own clock:
the process's lease keeper asks the authority to extend the lease, and only the authority's
answers (heartbeat, stage_result, complete) say whether this attempt still owns the run.
The Celery task calls ``claim_and_execute``; the embedded dispatcher claims for its pool
and calls ``execute_claimed``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.db import connection

from runs import authority
from runs.models import Run
from scheduler_project.errors import StaleFence
from scheduler_project.failpoints import failpoint, failpoint_enabled
from workers.jobs.framework import (
    JobCanceled,
    JobContext,
    JobControl,
    JobLost,
    JobTimedOut,
    TransientJobError,
    call_job,
    get_job,
)
from workers.contexts import context_for
from workers.leases import TRANSIENT_DB_ERRORS, LeaseKeeper, lease_keeper

log = logging.getLogger(__name__)

FIRST_RETRY_DELAY, MAX_RETRY_DELAY = 0.1, 2.0  # backoff between repeats of a stage/complete call
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class ExecutionOutcome:
    run_id: str
    attempt_id: str
    fence: int
    outcome: str  # succeeded | failed | canceled | stale | lost
    checksum: str | None
    error: str
    duration_seconds: float


def claim_and_execute(
    *, resource_classes, worker_label: str, limit: int = 1, lease_seconds: int | None = None,
    heartbeat_interval: float | None = None,
) -> list[ExecutionOutcome]:
    """Claim up to ``limit`` runs in one transaction and execute them one after another;
    every claimed attempt's lease is kept alive from the claim on. Empty when nothing is
    claimable."""
    runs = authority.claim_many(
        n=limit, worker_label=worker_label, resource_classes=resource_classes, lease_seconds=lease_seconds
    )
    held = [_hold(run, heartbeat_interval) for run in runs]
    return [_run_held(run, ctx) for run, ctx in zip(runs, held)]


def execute_claimed(run: Run, *, heartbeat_interval: float | None = None) -> ExecutionOutcome:
    """Run the job of an attempt the caller has just claimed, then stage and complete it."""
    return _run_held(run, _hold(run, heartbeat_interval))


def _hold(run: Run, heartbeat_interval: float | None) -> JobContext:
    """The job context of a claimed attempt, whose lease the process's keeper now keeps."""
    attempt = run.current_attempt
    payload = run.payload
    timeout = payload.get("timeoutSeconds")
    control = JobControl(timeout_seconds=float(timeout) if timeout else None)
    interval = heartbeat_interval if heartbeat_interval is not None else attempt.lease_seconds / 3
    lease_keeper().hold(attempt.id, run.fence, lease_seconds=attempt.lease_seconds, interval=interval,
                        control=control, claimed_at=time.monotonic())
    return context_for(run, control)


def _run_held(run: Run, ctx: JobContext) -> ExecutionOutcome:
    keeper = lease_keeper()
    started = time.monotonic()
    try:
        outcome, checksum, error = _execute(ctx, run.payload.get("jobType") or run.job_type, keeper)
    finally:
        keeper.release(ctx.attempt_id)
        ctx.discard_outputs()
    result = ExecutionOutcome(run.id, ctx.attempt_id, ctx.fence, outcome, checksum, error, time.monotonic() - started)
    log.info(
        "executed run=%s attempt=%s fence=%s job=%s outcome=%s duration=%.3fs checksum=%s error=%s",
        result.run_id, result.attempt_id, ctx.fence, run.job_type, outcome, result.duration_seconds,
        checksum or "-", error[:200] or "-",
    )
    return result


def _execute(ctx: JobContext, job_type: str, keeper: LeaseKeeper) -> tuple[str, str | None, str]:
    """(outcome, checksum, error) for one attempt; every path ends in one authority answer."""
    control = ctx.control
    ids = dict(run_id=ctx.run_id, attempt_id=ctx.attempt_id, fence=ctx.fence)
    try:
        output = call_job(get_job(job_type), ctx)
    except JobLost as exc:
        return "lost", None, str(exc)
    except JobCanceled:
        return _finish(ids, control, keeper, outcome="canceled")
    except JobTimedOut as exc:
        # The attempt is over, but a later attempt may finish in time; max_attempts bounds retries.
        return _finish(ids, control, keeper, outcome="failed", retryable=True, error=str(exc))
    except TransientJobError as exc:
        return _finish(ids, control, keeper, outcome="failed", retryable=True, error=_describe(exc))
    except Exception as exc:  # PermanentJobError, and any bug in the job itself
        return _finish(ids, control, keeper, outcome="failed", retryable=False, error=_describe(exc))

    if control.lost.is_set():
        return "lost", None, control.lost_reason  # uploading could never become canonical
    try:
        stored = _deliver(keeper, ids, authority.stage_result, data=output.upload_source(),
                          content_type=output.content_type, filename=output.filename)
    except StaleFence as exc:
        return "stale", None, str(exc)
    except Exception as exc:
        # Upload trouble is infrastructure, not the job: another attempt may succeed.
        return _finish(ids, control, keeper, outcome="failed", retryable=True, error=f"staging failed: {_describe(exc)}")
    failpoint("after_upload_before_complete")
    return _finish(ids, control, keeper, outcome="succeeded", object_key=stored.key,
                   version_id=stored.version_id, checksum=stored.checksum)


def _finish(ids: dict, control: JobControl, keeper: LeaseKeeper, **completion) -> tuple[str, str | None, str]:
    """Complete the attempt; a lost reply is repeated, and the authority answers a repeat
    with the saved run. The lease is kept alive until the authority has answered."""
    error = completion.get("error", "")
    if control.lost.is_set():
        return "lost", None, control.lost_reason
    keeper.completing(ids["attempt_id"])
    try:
        run = _deliver(keeper, ids, authority.complete, **completion)
        if failpoint_enabled("drop_completion_reply"):
            log.warning("failpoint drop_completion_reply: repeating complete for run=%s", ids["run_id"])
            run = _deliver(keeper, ids, authority.complete, **completion)
    except StaleFence as exc:
        return "stale", None, str(exc)
    except TRANSIENT_DB_ERRORS as exc:
        # Undeliverable while the lease could stand: whatever the authority recorded stands,
        # else the sweeper re-queues the run.
        log.error("complete for run=%s undeliverable: %s", ids["run_id"], exc)
        return "lost", None, f"completion undeliverable: {_describe(exc)}"
    return completion["outcome"], run.result_checksum if completion["outcome"] == "succeeded" else None, error


def _deliver(keeper: LeaseKeeper, ids: dict, call, **kwargs):
    """Call an idempotent authority operation for this attempt, repeating it with backoff
    while the database is unreachable and the lease may still be valid: a database outage
    shorter than the lease costs nothing (the keeper keeps beating meanwhile)."""
    delay = FIRST_RETRY_DELAY
    while True:
        try:
            return call(**ids, **kwargs)
        except TRANSIENT_DB_ERRORS:
            if connection.in_atomic_block or not keeper.lease_may_be_valid(ids["attempt_id"]):
                raise
            connection.close()  # reconnect on the next try
            time.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY)


def _describe(exc: BaseException) -> str:
    text = repr(exc)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
