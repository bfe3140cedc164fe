"""Celery tasks: thin interfaces that take ids, call one service, and are safe to run twice."""

import logging
import os
import socket

from celery import shared_task

from workers.hint_publisher import EXECUTE_TASK

log = logging.getLogger(__name__)
WORKER_LABEL = f"celery:{socket.gethostname()}:{os.getpid()}"


class JobFailed(Exception):
    """Raised after the authority recorded a failed attempt, so Flower and `celery events`
    show the hint task as failed; the run's own state already says what happens next."""


@shared_task(name=EXECUTE_TASK, ignore_result=True)
def execute(run_id: str, resource_class: str, worth: int = 1) -> dict:
    """A dispatch hint, worth up to ``worth`` claims of its resource class. The worker
    claims through the authority (weighted-fair, within tenant limits) before doing
    anything: as many runs as this process takes at once (workers.batching), passing the
    rest of the hint on before executing them, so other free processes start at once; when
    nothing is claimable the hint is dropped.

    Returns what it did (the runs it claimed, which need not include the hinted one, their
    job types and outcomes): with no result backend, that return value is what Flower shows.
    """
    from workers import batching, intake

    size = batching.claim_size(resource_class, worth)
    passed_on = 0

    def pass_rest_on(claimed):
        nonlocal passed_on
        if len(claimed) == size < worth:  # all claimed: more may be claimable, for any free process, starting now
            passed_on = _pass_on(run_id, resource_class, worth - size)

    # A hint brought this claim: hints of job types this process lacks go back to the relay.
    executed = intake.take(resource_class, worker_label=WORKER_LABEL, limit=size, unknown=intake.REOFFER,
                           on_claimed=pass_rest_on)
    report = {
        "hintedRunId": run_id,
        "worth": worth,
        "passedOn": passed_on,
        "outcome": "executed" if executed else "dropped",
        "runs": [
            {"runId": done.run_id, "attemptId": done.attempt_id, "jobType": done.job_type,
             "outcome": done.outcome, "durationSeconds": round(done.duration_seconds, 3)}
            for done in executed
        ],
    }
    if not executed:
        log.debug("hint for %s dropped: nothing claimable in %s", run_id, resource_class)
    failed = [entry for entry, done in zip(report["runs"], executed) if done.outcome == "failed"]
    if failed:
        errors = "; ".join(f"{done.run_id}: {done.error[:300]}" for done in executed if done.outcome == "failed")
        raise JobFailed(f"{failed}: {errors}")
    return report


def _pass_on(run_id: str, resource_class: str, worth: int) -> int:
    """Publish a hint worth ``worth`` claims; what it is worth, 0 when the broker refused it.
    The runs claimed already are executed either way: their leases are running. The runs the
    hint stood for keep their outbox rows, so the relay publishes them again (a broker that
    restarted is seen at its next step, a lost hint by the backstop)."""
    try:
        execute.apply_async(args=[run_id, resource_class, worth], queue=resource_class)
    except Exception as exc:  # the broker's trouble (kombu, redis, socket): never the claimed runs
        log.warning("could not pass on a hint worth %d claims of %s: %s", worth, resource_class, exc)
        return 0
    return worth


@shared_task(name="scheduler.relay", ignore_result=True)
def relay() -> int:
    """Relay backstop: republish lost hints, then publish what is unpublished."""
    from workers.hint_publisher import republish_and_relay

    return republish_and_relay()


@shared_task(name="scheduler.sweep", ignore_result=True)
def sweep() -> int:
    from runs.loops import sweep_pass

    return sweep_pass()


@shared_task(name="scheduler.scan", ignore_result=True)
def scan() -> int:
    from runs.loops import scan_pass

    return scan_pass().schedules


@shared_task(name="scheduler.effects", ignore_result=True)
def effects() -> int:
    """Deliver due effect intents; any number may run at once (SKIP LOCKED claims)."""
    from effects.delivery import effects_pass

    return effects_pass().deliveries


@shared_task(name="scheduler.cleanup", ignore_result=True)
def cleanup() -> dict:
    """One bounded retention pass: objects, then expired run history, then request keys."""
    from runs.retention import cleanup_pass

    return cleanup_pass().as_dict()
