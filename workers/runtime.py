"""The worker runtime: execute one claimed run and report its outcome to the authority.

The runtime never changes run state itself and never decides ownership by its own clock:
the process's lease keeper asks the authority to extend the lease, and only the authority's
answers (heartbeat, staging, complete) say whether this attempt still owns the run.
Work reaches it through the work intake (workers.intake), which claims and calls ``execute_batch``.

A process that claimed several runs at once executes them one after another and publishes
their outputs together: the outputs finished within ``GROUP_COMMIT_SECONDS`` of the first
one are staged by one registration and one recording statement and completed by one
group commit, each still fenced and judged on its own. Every outcome goes to the authority's
one completion entry point (``authority.complete_many``), which chooses how to record it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from kernel.errors import StaleFence
from kernel.failpoints import failpoint, failpoint_enabled
from runs import authority
from runs.models import AttemptReason, Run
from workers.job_context import context_for
from workers.jobs.framework import (
    JobCanceled, JobContext, JobControl, JobLost, JobOutput, JobTimedOut, TransientJobError, call_job, get_job,
)
from workers.leases import LeaseKeeper, TRANSIENT_DB_ERRORS, lease_keeper
from workers.timeouts import hard_limits, timeout_error
from workers.uploads import stage_results

log = logging.getLogger(__name__)

FIRST_RETRY_DELAY, MAX_RETRY_DELAY = 0.1, 2.0  # backoff between repeats of a stage/complete call
MAX_ERROR_CHARS = 2000
GROUP_COMMIT_SECONDS = 0.05  # the longest a finished output waits to be published with others
# A job that starts later than this after its claim (behind others of its batch) has the
# authority count its deadline again from its start (_start_on_time); sooner, the claim's
# deadline stands, the difference well inside JOB_TIMEOUT_LEASE_GRACE_SECONDS.
DEADLINE_SLACK_SECONDS = 0.5
PUBLISH_MARGIN_SECONDS = 1.0  # publishing a group, after the job that ran before it


@dataclass(frozen=True)
class ExecutionOutcome:
    run_id: str
    attempt_id: str
    fence: int
    outcome: str  # succeeded | failed | canceled | stale | lost
    checksum: str | None
    error: str
    duration_seconds: float  # from the start of its job to the authority's answer
    job_type: str
    job_seconds: float  # in the job itself


def execute_claimed(run: Run, *, heartbeat_interval: float | None = None) -> ExecutionOutcome:
    """Run the job of an attempt the caller has just claimed, then stage and complete it."""
    [outcome] = execute_batch([run], heartbeat_interval=heartbeat_interval)
    return outcome


def execute_batch(runs: list[Run], *, heartbeat_interval: float | None = None,
                  claimed_at: float | None = None) -> list[ExecutionOutcome]:
    """Execute runs this process has just claimed (or another process of this host, at
    monotonic ``claimed_at``: the keeper counts their leases from the claim), one after another; every
    claimed attempt's lease is kept alive from the claim until the authority has answered its
    completion. Outputs are published in groups (_Group). Outcomes in the order of ``runs``.
    Each job has its whole timeout from its own start, on the worker and on the authority
    (_start_on_time)."""
    keeper = lease_keeper()
    held: list[JobContext] = []
    group = _Group(keeper)
    claimed_at = time.monotonic() if claimed_at is None else claimed_at
    try:
        for run in runs:
            held.append(_hold(run, heartbeat_interval, claimed_at))
        # Strict runs (a start promise) first; the claim's order otherwise.
        for run, ctx in sorted(zip(runs, held), key=lambda pair: not pair[0].strict):
            group.make_room(ctx)
            started = time.monotonic()
            done = (_start_on_time(ctx, keeper, started - claimed_at)
                    or _execute(ctx, run.payload.get("jobType") or run.job_type, keeper))
            timing = (started, time.monotonic() - started)
            if isinstance(done, JobOutput):
                group.add(run, ctx, done, timing)
            else:
                group.outcomes[ctx.attempt_id] = _outcome(run, ctx, done, timing)
            if group.waited() >= GROUP_COMMIT_SECONDS:
                group.publish()
        group.publish()
    finally:
        for ctx in held:
            keeper.release(ctx.attempt_id)
            ctx.discard_outputs()
    return [group.outcomes[ctx.attempt_id] for ctx in held]


def _hold(run: Run, heartbeat_interval: float | None, claimed_at: float) -> JobContext:
    """The job context of a claimed attempt, whose lease the process's keeper now keeps."""
    attempt = run.current_attempt
    payload = run.payload
    timeout = payload.get("timeoutSeconds")
    control = JobControl(timeout_seconds=float(timeout) if timeout else None)
    interval = heartbeat_interval if heartbeat_interval is not None else attempt.lease_seconds / 3
    keeper = lease_keeper()
    keeper.hold(attempt.id, run.fence, lease_seconds=attempt.lease_seconds, interval=interval, control=control,
                claimed_at=claimed_at)
    try:
        return context_for(run, control)
    except BaseException:
        keeper.release(attempt.id)  # nobody will run it: its lease lapses and the sweeper re-queues it
        raise


def _outcome(run: Run, ctx: JobContext, done: tuple[str, str | None, str], timing) -> ExecutionOutcome:
    """The outcome of one run; ``timing`` is (monotonic start of its job, seconds in it)."""
    outcome, checksum, error = done
    started, job_seconds = timing
    result = ExecutionOutcome(run.id, ctx.attempt_id, ctx.fence, outcome, checksum, error,
                              time.monotonic() - started, run.job_type, job_seconds)
    log.info(
        "executed run=%s attempt=%s fence=%s job=%s outcome=%s duration=%.3fs checksum=%s error=%s",
        result.run_id, result.attempt_id, ctx.fence, run.job_type, outcome, result.duration_seconds,
        checksum or "-", error[:200] or "-",
    )
    return result


def _start_on_time(ctx: JobContext, keeper: LeaseKeeper, waited: float) -> tuple[str, str | None, str] | None:
    """None when the job may start now with its whole timeout: it has none, or it starts
    within DEADLINE_SLACK_SECONDS of its claim (the claim's deadline counts from there), or the
    authority has just counted its deadline again from now. Else the outcome of an attempt
    that lost its run while it waited, whose job does not start at all."""
    if not ctx.control.timeout_seconds or waited <= DEADLINE_SLACK_SECONDS:
        return None
    if ctx.control.lost.is_set():
        return "lost", None, ctx.control.lost_reason
    try:
        _deliver(keeper, [ctx], lambda: authority.restart_deadline(run_id=ctx.run_id, attempt_id=ctx.attempt_id,
                                                                   fence=ctx.fence))
    except StaleFence as exc:
        return "stale", None, str(exc)
    except TRANSIENT_DB_ERRORS as exc:
        return "lost", None, f"deadline undeliverable: {_describe(exc)}"
    return None


def _execute(ctx: JobContext, job_type: str, keeper: LeaseKeeper) -> JobOutput | tuple[str, str | None, str]:
    """The job's output, still to be published; or (outcome, checksum, error) when the
    attempt ended otherwise, every such path ending in one authority answer."""
    control = ctx.control
    control.start()
    # The attempt is over at its timeout, but a later attempt may finish in time; max_attempts
    # bounds retries. A job that never checks in is interrupted (workers.timeouts).
    timed_out = dict(outcome="failed", retryable=True, error=timeout_error(ctx), reason=AttemptReason.TIMEOUT)
    try:
        with hard_limits(ctx, on_hard=lambda: _finish(ctx, keeper, **timed_out)):
            output = call_job(get_job(job_type), ctx)
    except JobLost as exc:
        return "lost", None, str(exc)
    except JobCanceled:
        return _finish(ctx, keeper, outcome="canceled")
    except JobTimedOut:
        return _finish(ctx, keeper, **timed_out)
    except TransientJobError as exc:
        return _finish(ctx, keeper, outcome="failed", retryable=True, error=_describe(exc))
    except Exception as exc:  # PermanentJobError, and any bug in the job itself
        return _finish(ctx, keeper, outcome="failed", retryable=False, error=_describe(exc))
    if control.lost.is_set():
        return "lost", None, control.lost_reason  # uploading could never become canonical
    return output


class _Group:
    """Finished outputs waiting to be published together, and the outcomes so far."""

    def __init__(self, keeper: LeaseKeeper):
        self.keeper = keeper
        self.pending: list[tuple[Run, JobContext, JobOutput, tuple]] = []
        self.outcomes: dict[str, ExecutionOutcome] = {}
        self.first_at: float | None = None

    def add(self, run: Run, ctx: JobContext, output: JobOutput, timing: tuple) -> None:
        self.pending.append((run, ctx, output, timing))
        self.first_at = self.first_at or time.monotonic()

    def waited(self) -> float:
        return 0.0 if self.first_at is None else time.monotonic() - self.first_at

    def publish(self) -> None:
        pending, self.pending, self.first_at = self.pending, [], None
        for (run, ctx, _, timing), done in zip(pending, self._stage_and_complete(pending)):
            self.outcomes[ctx.attempt_id] = _outcome(run, ctx, done, timing)

    def make_room(self, ctx: JobContext) -> None:
        """Before the next job of the batch (``ctx``'s): publish the outputs waiting now if that
        job, run to its hard limit, could outlast their leases, which end at their own deadlines
        plus JOB_TIMEOUT_LEASE_GRACE_SECONDS. Quick jobs of one job type go on waiting together."""
        if not self.pending:
            return
        timeout = ctx.control.timeout_seconds
        worst_end = (time.monotonic() + timeout + settings.JOB_HARD_TIMEOUT_GRACE_SECONDS + PUBLISH_MARGIN_SECONDS
                     if timeout else None)
        for _, waiting, _, _ in self.pending:
            if waiting.control.deadline is None:
                continue
            # Its start + its timeout; the authority's deadline is at most the slack earlier.
            lease_end = waiting.control.deadline - DEADLINE_SLACK_SECONDS + settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS
            if worst_end is None or worst_end > lease_end:
                self.publish()
                return

    def _stage_and_complete(self, pending) -> list[tuple[str, str | None, str]]:
        keeper = self.keeper
        contexts = [ctx for _, ctx, _, _ in pending]
        results: list = [None] * len(pending)
        uploads: dict[int, authority.Upload] = {}
        for i, (_, ctx, output, _) in enumerate(pending):
            try:
                uploads[i] = authority.Upload(ctx.run_id, ctx.attempt_id, ctx.fence, output.upload_source(),
                                              output.content_type, output.filename)
            except Exception as exc:  # its spooled output is gone: another attempt may succeed
                results[i] = self._failed_staging(ctx, exc)
        try:
            staged = dict(zip(uploads, _deliver(keeper, contexts, stage_results, list(uploads.values()))))
        except TRANSIENT_DB_ERRORS as exc:
            return [("lost", None, f"staging undeliverable: {_describe(exc)}")] * len(pending)
        for i, stored in staged.items():
            ctx = contexts[i]
            if isinstance(stored, StaleFence):
                results[i] = ("stale", None, str(stored))
            elif isinstance(stored, Exception):
                results[i] = self._failed_staging(ctx, stored)
            elif ctx.control.lost.is_set():
                results[i] = ("lost", None, ctx.control.lost_reason)
        ready = [(i, contexts[i], staged[i]) for i in staged if results[i] is None]
        if ready:
            failpoint("after_upload_before_complete")
            outcomes = [authority.Outcome(ctx.run_id, ctx.attempt_id, ctx.fence, "succeeded", stored)
                        for _, ctx, stored in ready]
            for i, answer in zip([i for i, _, _ in ready], _report(keeper, [ctx for _, ctx, _ in ready], outcomes)):
                results[i] = answer
        return results

    def _failed_staging(self, ctx: JobContext, exc: BaseException) -> tuple[str, str | None, str]:
        """Upload trouble is infrastructure, not the job: a retryable failure."""
        return _finish(ctx, self.keeper, outcome="failed", retryable=True, error=f"staging failed: {_describe(exc)}")


def _report(keeper: LeaseKeeper, contexts: list[JobContext], outcomes: list[authority.Outcome]
            ) -> list[tuple[str, str | None, str]]:
    """Hand these attempts' outcomes to the authority (``complete_many``) and read its answers
    as (outcome, checksum, error). A lost reply is repeated, and the authority answers a repeat
    with the saved run. Each lease is kept alive until the authority has answered."""
    for ctx in contexts:
        keeper.completing(ctx.attempt_id)
    try:
        answers = _deliver(keeper, contexts, authority.complete_many, outcomes)
        if failpoint_enabled("drop_completion_reply"):
            for ctx in contexts:
                log.warning("failpoint drop_completion_reply: repeating complete for run=%s", ctx.run_id)
            answers = _deliver(keeper, contexts, authority.complete_many, outcomes)
    except TRANSIENT_DB_ERRORS as exc:
        # Undeliverable while the leases could stand: whatever the authority recorded stands,
        # else the sweeper re-queues the runs.
        log.error("completion of %s undeliverable: %s", [ctx.run_id for ctx in contexts], exc)
        return [("lost", None, f"completion undeliverable: {_describe(exc)}")] * len(outcomes)
    except Exception as exc:  # a bug (TransitionConflict): its transaction rolled back; the rest of the batch goes on
        log.exception("completion of %s failed", [ctx.run_id for ctx in contexts])
        return [("lost", None, f"completion failed: {_describe(exc)}")] * len(outcomes)
    results = []
    for ctx, reported, answer in zip(contexts, outcomes, answers):
        if isinstance(answer, StaleFence):
            results.append(("stale", None, str(answer)))
        elif isinstance(answer, Exception):  # not this attempt's to record: its lease lapses, the sweeper decides
            log.error("completion of run=%s refused: %s", ctx.run_id, answer)
            results.append(("lost", None, f"completion refused: {_describe(answer)}"))
        elif reported.outcome == "succeeded":
            results.append(("succeeded", answer.result_checksum, ""))
        else:
            results.append((reported.outcome, None, reported.error))
    return results


def _finish(ctx: JobContext, keeper: LeaseKeeper, **completion) -> tuple[str, str | None, str]:
    """Report an attempt that did not succeed (unless its lease is already known lost)."""
    if ctx.control.lost.is_set():
        return "lost", None, ctx.control.lost_reason
    [done] = _report(keeper, [ctx], [authority.Outcome(ctx.run_id, ctx.attempt_id, ctx.fence, **completion)])
    return done


def _deliver(keeper: LeaseKeeper, attempts, call, *args):
    """Call an idempotent authority operation for these attempts (contexts or ids),
    repeating it with backoff while the database is unreachable and a lease may still be
    valid: a database outage shorter than the lease costs nothing (the keeper keeps beating
    meanwhile)."""
    attempt_ids = [getattr(a, "attempt_id", a) for a in attempts]
    delay = FIRST_RETRY_DELAY
    while True:
        try:
            return call(*args)
        except TRANSIENT_DB_ERRORS:
            if connection.in_atomic_block or not any(map(keeper.lease_may_be_valid, attempt_ids)):
                raise
            connection.close()  # reconnect on the next try
            time.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY)


def _describe(exc: BaseException) -> str:
    text = repr(exc)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
