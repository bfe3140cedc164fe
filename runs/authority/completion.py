"""Publication: staging an attempt's output, and the fenced completion of section 13."""

import logging
import random
from datetime import timedelta

from django.db import transaction
from django.db.models.functions import Now

from effects.models import EffectIntent, EffectKind
from runs.authority.ownership import current_attempt, require_credential, require_current
from runs.authority.sql import register_upload, transition
from runs.authority.transitions import finish_run
from runs.backoff import retry_delay_seconds
from runs import metrics
from scheduler_project.clock import authority_now
from runs.models import (
    Attempt,
    AttemptState,
    ObjectState,
    Outbox,
    PendingReason,
    Run,
    RunState,
    StoredObject,
)
from schedules.locks import lock_schedule_then_run
from scheduler_project.errors import InvalidRequest, InvalidState, NotFound, StaleFence
from scheduler_project.failpoints import failpoint
from objectstore import ObjectExists, StoredVersion, download_filename, get_object_store
from objectstore.sources import FileSource, checksum_of, put_new_from

log = logging.getLogger(__name__)

OUTCOMES = ("succeeded", "failed", "canceled")


def result_key(run_id: str, attempt_id: str) -> str:
    """Immutable, attempt-scoped name: a stale attempt can only ever write its own orphan."""
    return f"runs/{run_id}/{attempt_id}/result"


def stage_result(
    *, run_id: str, attempt_id: str, fence: int, data: bytes | FileSource, content_type: str, filename: str = "",
    worker_token=None,
) -> StoredObject:
    """Register the upload (staged) before it begins, upload outside any transaction, then
    record the version and the job's file name. Repeating the same bytes returns the same
    object, also when the version of an earlier try was written but never recorded. ``data``
    is bytes, or a FileSource for an output too large to hold in memory (uploaded in chunks)."""
    key = result_key(run_id, attempt_id)
    existing = _register(key, run_id, attempt_id, fence, content_type[:200], worker_token)
    if existing.version_id:
        return _same_upload(existing, data)
    try:
        stored = _upload(key, data, content_type)
    except Exception:
        metrics.PUBLICATION_FAILURES.labels("upload").inc()
        raise
    recorded = {
        "version_id": stored.version_id,
        "checksum": stored.checksum,
        "size": stored.size,
        "content_type": stored.content_type,
        "filename": download_filename(filename) if filename else "",
    }
    updated = StoredObject.objects.filter(id=existing.id, state=ObjectState.STAGED, version_id__isnull=True).update(
        **recorded, uploaded_at=Now()
    )
    if not updated:
        # Cleanup took the row while we uploaded: this version can never be published.
        try:
            get_object_store().delete(key, stored.version_id)
        except Exception:  # at worst one unreferenced object remains for the orphan sweep
            log.warning("could not remove unpublishable upload %s", key, exc_info=True)
        raise InvalidState("the staged object was claimed by cleanup; upload under a new attempt")
    for name, value in recorded.items():
        setattr(existing, name, value)
    return existing


def _register(key: str, run_id: str, attempt_id: str, fence: int, content_type: str, worker_token) -> StoredObject:
    """The staged registry row of this attempt's upload, created if new; NotFound,
    Forbidden or StaleFence when the caller may not upload for this attempt."""
    token_id = worker_token.id if worker_token is not None else None
    registered = register_upload(key, run_id, attempt_id, fence, content_type, worker_token_id=token_id)
    if registered is not None:  # the common case, one statement
        object_id, created_at = registered
        return StoredObject(id=object_id, key=key, run_id=run_id, attempt_id=attempt_id, fence=fence,
                            state=ObjectState.STAGED, content_type=content_type, created_at=created_at)
    with metrics.counting_stale("stage"), transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("no such run")
        now = authority_now()
        current_attempt(run, attempt_id, fence, now, worker_token=worker_token, operation="stage")
        existing = StoredObject.objects.filter(key=key).first()
        if existing is None:
            existing = StoredObject.objects.create(
                key=key, run=run, attempt_id=attempt_id, fence=fence, created_at=now, content_type=content_type,
            )
        return existing


def _upload(key: str, data: bytes | FileSource, content_type: str) -> StoredVersion:
    """Write a new object; if an earlier try already wrote this key but its version never
    got recorded (the database failed in between), the same bytes adopt that version."""
    store = get_object_store()
    try:
        return put_new_from(store, key, data, content_type)
    except ObjectExists:
        written = store.current(key)
        if written.checksum != checksum_of(data):
            raise InvalidState("this attempt already uploaded a different result") from None
        return written


def _same_upload(existing: StoredObject, data: bytes | FileSource) -> StoredObject:
    if existing.checksum != checksum_of(data):
        raise InvalidState("this attempt already uploaded a different result; objects are immutable")
    return existing


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
    worker_token=None,
) -> Run:
    if outcome not in OUTCOMES:
        raise InvalidRequest(f"outcome must be one of {', '.join(OUTCOMES)}", field="outcome")
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
            _end_attempt(attempt, AttemptState.FAILED, now, error=error, retryable=retryable)
            outbox += _fail_or_retry(schedule, run, now, error, retryable)
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


def _end_attempt(attempt: Attempt, state: str, now, *, error: str = "", retryable=None) -> None:
    transition(
        attempt, {"state": AttemptState.RUNNING},
        state=state, finished_at=now, error=error[:10000], retryable=retryable,
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
    _effect_intents(run, now)
    return outbox


def _effect_intents(run: Run, now) -> None:
    """Only a committed canonical publication creates effect intents, in its transaction;
    the effects loop claims the intents themselves, so they need no outbox row."""
    intents = [
        EffectIntent(
            action=f"{verb}-{run.id}", run=run, kind=kind, target=target,
            result_key=run.result_key, result_version_id=run.result_version_id,
            result_checksum=run.result_checksum, created_at=now, updated_at=now,
        )
        for kind, verb in ((EffectKind.EMAIL, "send"), (EffectKind.WEBHOOK, "post"))
        if (target := (run.payload.get("effects") or {}).get(kind))
    ]
    EffectIntent.objects.bulk_create(intents)


def _fail_or_retry(schedule, run, now, error, retryable) -> list[Outbox]:
    if retryable and run.attempt_count < run.max_attempts and not run.cancellation_requested:
        retry = run.payload.get("retry") or {}
        delay = retry_delay_seconds(
            run.attempt_count,
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
