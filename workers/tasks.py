"""Celery tasks: thin interfaces that take ids, call one service, and are safe to run twice."""

import logging
import os
import socket

from celery import shared_task

from workers.dispatch import EXECUTE_TASK

log = logging.getLogger(__name__)
WORKER_LABEL = f"celery:{socket.gethostname()}:{os.getpid()}"


class JobFailed(Exception):
    """Raised after the authority recorded a failed attempt, so Flower and `celery events`
    show the hint task as failed; the run's own state already says what happens next."""


@shared_task(name=EXECUTE_TASK, ignore_result=True)
def execute(run_id: str, resource_class: str) -> dict:
    """A dispatch hint. The worker claims through the authority (weighted-fair, within
    tenant limits) before doing anything; when nothing is claimable the hint is dropped.

    Returns what it did (the run it claimed, which may not be the hinted one, the job type and
    the outcome): with no result backend, that return value is what Flower shows.
    """
    from runs.models import Run
    from workers.runtime import claim_and_execute

    executed = claim_and_execute(resource_classes=[resource_class], worker_label=WORKER_LABEL)
    if not executed:
        log.debug("hint for %s dropped: nothing claimable in %s", run_id, resource_class)
        return {"hintedRunId": run_id, "claimedRunId": None, "jobType": None, "outcome": "dropped"}
    [done] = executed  # one claim per hint
    report = {
        "hintedRunId": run_id,
        "claimedRunId": done.run_id,
        "attemptId": done.attempt_id,
        "jobType": Run.objects.filter(id=done.run_id).values_list("job_type", flat=True).first(),
        "outcome": done.outcome,
        "durationSeconds": round(done.duration_seconds, 3),
    }
    if done.outcome == "failed":
        raise JobFailed(f"{report}: {done.error[:500]}")
    return report


@shared_task(name="scheduler.relay", ignore_result=True)
def relay() -> int:
    """Relay backstop: republish lost hints, then publish what is unpublished."""
    from workers.dispatch import republish_and_relay

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
