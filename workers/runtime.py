"""The worker runtime: execute one claimed run and report its outcome to the authority.

The runtime never changes run state itself and never decides ownership by its own clock:
a heartbeat thread asks the authority to extend the lease, and only the authority's
answers (heartbeat, stage_result, complete) say whether this attempt still owns the run.
The Celery task and the embedded dispatcher both call ``claim_and_execute``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError, connection

from runs import authority
from runs.models import Run
from scheduler_project.errors import NotFound, StaleFence
from scheduler_project.failpoints import failpoint, failpoint_enabled
from workers.jobs.framework import (
    JobCanceled,
    JobContext,
    JobControl,
    JobLost,
    JobTimedOut,
    TransientJobError,
    get_job,
)

log = logging.getLogger(__name__)

# A dropped connection or a failover: the call may or may not have committed; repeat it.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)
DELIVERY_DELAYS = (0.1, 0.5, 1.0, 2.0)  # between repeats of a stage/complete call
MAX_ERROR_CHARS = 2000
MIN_HEARTBEAT_INTERVAL = 0.05


@dataclass(frozen=True)
class ExecutionOutcome:
    run_id: str
    attempt_id: str
    fence: int
    outcome: str  # succeeded | failed | canceled | stale | lost
    checksum: str | None
    error: str
    duration_seconds: float


class _Heartbeat(threading.Thread):
    """Extends the lease every ``interval`` seconds and relays what the authority says."""

    def __init__(self, run_id: str, attempt_id: str, fence: int, interval: float, control: JobControl):
        super().__init__(name=f"heartbeat-{run_id}", daemon=True)
        self.run_id, self.attempt_id, self.fence = run_id, attempt_id, fence
        self.interval = interval
        self.control = control
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.wait(self.interval):
                if not self.beat():
                    return
        finally:
            connection.close()  # this thread's own connection

    def beat(self) -> bool:
        """One heartbeat; False once this attempt has lost the run."""
        try:
            run = authority.heartbeat(run_id=self.run_id, attempt_id=self.attempt_id, fence=self.fence)
        except (StaleFence, NotFound) as exc:
            self.control.mark_lost(f"heartbeat refused: {exc}")
            return False
        except TRANSIENT_DB_ERRORS as exc:
            # The authority may still hold the lease; if not, the next beat hears StaleFence.
            log.warning("heartbeat run=%s failed, retrying next beat: %s", self.run_id, exc)
            connection.close()
            return True
        if run.cancellation_requested:
            self.control.request_cancel()
        return True

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=max(5.0, self.interval))


def claim_and_execute(
    *, resource_classes, worker_label: str, lease_seconds: int | None = None,
    heartbeat_interval: float | None = None,
) -> ExecutionOutcome | None:
    """Claim one run and execute it; None when nothing is claimable."""
    run = authority.claim(worker_label=worker_label, resource_classes=resource_classes, lease_seconds=lease_seconds)
    if run is None:
        return None
    return execute_claimed(run, heartbeat_interval=heartbeat_interval)


def execute_claimed(run: Run, *, heartbeat_interval: float | None = None) -> ExecutionOutcome:
    """Run the job of an attempt the caller has just claimed, then stage and complete it."""
    attempt = run.current_attempt
    fence = run.fence
    payload = run.payload
    timeout = payload.get("timeoutSeconds")
    control = JobControl(timeout_seconds=float(timeout) if timeout else None)
    ctx = JobContext(
        run_id=run.id,
        attempt_id=attempt.id,
        fence=fence,
        scheduled_at=run.scheduled_at,
        timezone=(run.schedule.recurrence or {}).get("timezone") or "UTC",
        params=dict(payload.get("params") or {}),
        control=control,
    )
    interval = heartbeat_interval if heartbeat_interval is not None else attempt.lease_seconds / 3
    heartbeat = _Heartbeat(run.id, attempt.id, fence, max(MIN_HEARTBEAT_INTERVAL, interval), control)
    started = time.monotonic()
    heartbeat.start()
    try:
        outcome, checksum, error = _execute(ctx, payload.get("jobType") or run.job_type, heartbeat)
    finally:
        heartbeat.stop()
    result = ExecutionOutcome(run.id, attempt.id, fence, outcome, checksum, error, time.monotonic() - started)
    log.info(
        "executed run=%s attempt=%s fence=%s job=%s outcome=%s duration=%.3fs checksum=%s error=%s",
        result.run_id, result.attempt_id, fence, run.job_type, outcome, result.duration_seconds,
        checksum or "-", error[:200] or "-",
    )
    return result


def _execute(ctx: JobContext, job_type: str, heartbeat: _Heartbeat) -> tuple[str, str | None, str]:
    """(outcome, checksum, error) for one attempt; every path ends in one authority answer."""
    control = ctx.control
    ids = dict(run_id=ctx.run_id, attempt_id=ctx.attempt_id, fence=ctx.fence)
    try:
        output = get_job(job_type)(ctx)
    except JobLost as exc:
        return "lost", None, str(exc)
    except JobCanceled:
        return _finish(ids, control, heartbeat, outcome="canceled")
    except JobTimedOut as exc:
        # The attempt is over, but a later attempt may finish in time; max_attempts bounds retries.
        return _finish(ids, control, heartbeat, outcome="failed", retryable=True, error=str(exc))
    except TransientJobError as exc:
        return _finish(ids, control, heartbeat, outcome="failed", retryable=True, error=_describe(exc))
    except Exception as exc:  # PermanentJobError, and any bug in the job itself
        return _finish(ids, control, heartbeat, outcome="failed", retryable=False, error=_describe(exc))

    if control.lost.is_set():
        return "lost", None, control.lost_reason  # uploading could never become canonical
    try:
        stored = _deliver(authority.stage_result, **ids, data=output.data, content_type=output.content_type)
    except StaleFence as exc:
        return "stale", None, str(exc)
    except Exception as exc:
        # Upload trouble is infrastructure, not the job: another attempt may succeed.
        return _finish(ids, control, heartbeat, outcome="failed", retryable=True, error=f"staging failed: {_describe(exc)}")
    failpoint("after_upload_before_complete")
    return _finish(ids, control, heartbeat, outcome="succeeded", object_key=stored.key,
                   version_id=stored.version_id, checksum=stored.checksum)


def _finish(ids: dict, control: JobControl, heartbeat: _Heartbeat, **completion) -> tuple[str, str | None, str]:
    """Complete the attempt; a lost reply is repeated, and the authority answers a repeat
    with the saved run."""
    error = completion.get("error", "")
    # A beat racing the completion would be refused once the run is terminal and counted
    # as a stale-fence rejection; the last beat left at least two thirds of the lease.
    heartbeat.stop()
    if control.lost.is_set():
        return "lost", None, control.lost_reason
    try:
        run = _deliver(authority.complete, **ids, **completion)
        if failpoint_enabled("drop_completion_reply"):
            log.warning("failpoint drop_completion_reply: repeating complete for run=%s", ids["run_id"])
            run = _deliver(authority.complete, **ids, **completion)
    except StaleFence as exc:
        return "stale", None, str(exc)
    except TRANSIENT_DB_ERRORS as exc:
        # Undeliverable: whatever the authority recorded stands, else the lease expires and
        # the sweeper re-queues the run.
        log.error("complete for run=%s undeliverable: %s", ids["run_id"], exc)
        return "lost", None, f"completion undeliverable: {_describe(exc)}"
    return completion["outcome"], run.result_checksum if completion["outcome"] == "succeeded" else None, error


def _deliver(call, **kwargs):
    """Call an idempotent authority operation, repeating it while the database is unreachable."""
    for delay in (*DELIVERY_DELAYS, None):
        try:
            return call(**kwargs)
        except TRANSIENT_DB_ERRORS:
            if delay is None or connection.in_atomic_block:
                raise
            connection.close()  # reconnect on the next try
            time.sleep(delay)


def _describe(exc: BaseException) -> str:
    text = repr(exc)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
