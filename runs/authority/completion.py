"""The fenced completion (docs/design.md, "The life of a run", 5): one attempt's outcome, judged and recorded."""

import random
from datetime import timedelta

from django.db import transaction

from runs.models import EffectIntent, EffectKind
from runs.authority.owner import require_current
from runs.authority.ownership import require_credential
from runs.authority.statements.rows import transition
from runs.authority.finish_and_dispatch import finish_run
from runs.backoff import retry_delay_seconds
from runs import metrics
from kernel.clock import authority_now
from runs.models import (
    Attempt,
    AttemptReason,
    AttemptState,
    ObjectState,
    Outbox,
    PendingReason,
    Run,
    RunState,
    StoredObject,
)
from runs.authority.operations import attempts_since_replay
from runs.authority.locks import lock_schedule_then_run
from kernel.errors import InvalidRequest, InvalidState, NotFound, StaleFence
from kernel.failpoints import failpoint


OUTCOMES = ("succeeded", "failed", "canceled")


def complete(
    *,
    run_id: str,
    attempt_id: str,
    fence: int,
    outcome: str,
    object_key: str | None = None,
    version_id: str | None = None,
    checksum: str | None = None,
    error: str = "",
    retryable: bool = False,
    reason: str = "",
    worker_token=None,
) -> Run:
    """``reason`` (a failed outcome only): AttemptReason, "timeout" for a job that ran past
    its job type's timeout."""
    if outcome not in OUTCOMES:
        raise InvalidRequest(f"outcome must be one of {', '.join(OUTCOMES)}", field="outcome")
    if reason not in AttemptReason.values or (reason and outcome != "failed"):
        raise InvalidRequest("reason must be \"timeout\" on a failed outcome, or absent", field="reason")
    with metrics.counting_stale("complete"), transaction.atomic(durable=True):
        schedule, run = lock_schedule_then_run(run_id)
        now = authority_now()
        attempt = Attempt.objects.filter(id=attempt_id, run=run).first()
        if attempt is None:
            raise NotFound("no such attempt")
        require_credential(attempt, worker_token, "complete")
        if attempt.state != AttemptState.RUNNING:
            return _repeat(run, attempt, fence, outcome, checksum)
        require_current(run, attempt, fence, now)
        outbox: list[Outbox] = []
        if outcome == "succeeded":
            outbox += _publish(schedule, run, attempt, object_key, version_id, checksum, now)
        elif outcome == "canceled":
            if not run.cancellation_requested:
                raise InvalidState("cancellation was not requested for this run")
            _end_attempt(attempt, AttemptState.CANCELED, now)
            outbox += finish_run(schedule, run, RunState.CANCELED, now, cancellation_accepted=True)
        else:
            _end_attempt(attempt, AttemptState.FAILED, now, error=error, retryable=retryable, reason=reason)
            outbox += fail_or_retry(schedule, run, now, error, retryable)
        Outbox.objects.bulk_create(outbox)
        execution = (now - attempt.started_at).total_seconds()
    metrics.EXECUTION.labels(run.resource_class, outcome).observe(execution)
    failpoint("after_complete_commit")
    return run


def _repeat(run: Run, attempt: Attempt, fence: int, outcome: str, checksum: str | None) -> Run:
    """A completion from an attempt that already finished: the saved answer for the same
    attempt, fence and outcome, or a refusal."""
    if fence != attempt.fence:
        raise StaleFence("this fence is not the attempt's", details={"currentFence": run.fence})
    if attempt.state == outcome:
        if outcome == "succeeded" and checksum != run.result_checksum:
            raise InvalidState("this attempt already published a result with a different checksum")
        return run
    if attempt.state == AttemptState.EXPIRED or attempt.fence != run.fence:
        raise StaleFence("this attempt no longer owns the run", details={"currentFence": run.fence})
    raise InvalidState(f"this attempt already completed as {attempt.state}")


def _end_attempt(attempt: Attempt, state: str, now, *, error: str = "", retryable=None, reason: str = "") -> None:
    transition(
        attempt, {"state": AttemptState.RUNNING},
        state=state, finished_at=now, error=error[:10000], retryable=retryable, reason=reason,
    )


def _publish(schedule, run, attempt, object_key, version_id, checksum, now) -> list[Outbox]:
    if not object_key or not checksum:
        raise InvalidRequest("a succeeded completion names its object and checksum", field="object")
    obj = StoredObject.objects.select_for_update().filter(key=object_key).first()
    if (
        obj is None
        or obj.attempt_id != attempt.id
        or obj.fence != attempt.fence
        or (version_id is not None and obj.version_id != version_id)
        or obj.version_id is None
    ):
        raise InvalidState("the object was not staged by this attempt")
    if obj.state != ObjectState.STAGED:
        raise InvalidState(f"the object is {obj.state} and can no longer be published")
    if obj.checksum != checksum:
        raise InvalidState("checksum does not match the staged object")
    transition(obj, {"state": ObjectState.STAGED}, state=ObjectState.REFERENCED, referenced_at=now)
    _end_attempt(attempt, AttemptState.SUCCEEDED, now)
    outbox = finish_run(
        schedule, run, RunState.SUCCEEDED, now,
        accepted_attempt=attempt, result_key=obj.key, result_version_id=obj.version_id,
        result_checksum=obj.checksum, result_size=obj.size, result_content_type=obj.content_type,
    )
    EffectIntent.objects.bulk_create(effect_intents(run.id, run.payload.get("effects"), obj, now))
    return outbox


def effect_intents(run_id: str, effects: dict | None, result: StoredObject, now) -> list[EffectIntent]:
    """The effect intents (unsaved) of a canonical publication, by the run's ``effects``.
    Only a committed publication creates them, in its own transaction; the effects loop
    claims the intents themselves, so they need no outbox row."""
    return [
        EffectIntent(
            action=f"{verb}-{run_id}", run_id=run_id, kind=kind, target=target, result_key=result.key,
            result_version_id=result.version_id, result_checksum=result.checksum, created_at=now, updated_at=now,
        )
        for kind, verb in ((EffectKind.EMAIL, "send"), (EffectKind.WEBHOOK, "post"))
        if (target := (effects or {}).get(kind))
    ]


def fail_or_retry(schedule, run, now, error, retryable) -> list[Outbox]:
    """The run after a failed attempt: pending behind its retry delay while a retryable
    failure has attempts left, else finished (canceled when cancellation was requested)."""
    if retryable and run.attempt_count < run.max_attempts and not run.cancellation_requested:
        retry = run.payload.get("retry") or {}
        delay = retry_delay_seconds(
            attempts_since_replay(run),
            float(retry.get("initialDelaySeconds", 5)),
            float(retry.get("maxDelaySeconds", 300)),
            random,
        )
        transition(
            run, {"state": RunState.RUNNING},
            state=RunState.PENDING, pending_reason=PendingReason.RETRY, due_at=now + timedelta(seconds=delay),
            lease_expires_at=None, error=error[:10000],
        )
        return []
    if run.cancellation_requested:
        return finish_run(schedule, run, RunState.CANCELED, now, error=error, cancellation_accepted=True)
    return finish_run(schedule, run, RunState.FAILED, now, error=error or "failed")
