"""Retention and safe cleanup, in bounded batches (`manage.py cleanup`, task scheduler.cleanup).

Objects follow the registry protocol (design section 06). Cleanup locks the run, then the
registry row (the order publication uses after the schedule), and marks the row `deleting`
only when no retained reference exists, no download pin is live, and the uploading attempt
can no longer publish. It commits that, then deletes from the store outside any
transaction, then marks the row `deleted`. Publication rejects rows that are not `staged`,
so either publication wins the row lock and the object is kept, or cleanup wins and
publication fails: never a canonical pointer to a deleted object.

Run history goes only after its objects: effects, outbox, registry, attempts, then the run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from effects.models import EffectDelivery, EffectIntent, EffectState
from objectstore import get_object_store
from runs.authority.claims import require_current
from runs.clock import authority_now
from runs.counts import Counts
from runs.models import (
    TERMINAL_STATES,
    Attempt,
    AttemptState,
    ObjectState,
    Outbox,
    Run,
    RunState,
    StoredObject,
)
from schedules.models import RequestKey, Schedule
from scheduler_project.errors import StaleFence

log = logging.getLogger(__name__)

MAX_BATCHES_PER_PASS = 20


@dataclass
class CleanupStats(Counts):
    objects_deleting: int = 0
    objects_deleted: int = 0
    objects_failed: int = 0
    runs_deleted: int = 0
    request_keys_deleted: int = 0


def cleanup_pass(*, batch_size: int | None = None, max_batches: int = MAX_BATCHES_PER_PASS) -> CleanupStats:
    """Objects first (so run history can follow), then run history, then request keys.
    Each step works batch by batch and stops after ``max_batches``: a pass is bounded."""
    batch_size = batch_size or settings.CLEANUP_BATCH_SIZE
    total = CleanupStats()
    for step in (collect_objects, expire_run_history, expire_request_keys):
        for _ in range(max_batches):
            stats = step(batch_size=batch_size)
            total.add(stats)
            if not _worked(stats, batch_size):
                break
    return total


def _worked(stats: CleanupStats, batch_size: int) -> bool:
    touched = stats.objects_deleting + stats.objects_deleted + stats.objects_failed
    return max(touched, stats.runs_deleted, stats.request_keys_deleted) >= batch_size


# --- Objects -----------------------------------------------------------------------------------


def object_candidates(*, now, limit: int) -> list[tuple[int, str]]:
    """(object id, run id) of rows that may be deletable; each is re-checked under lock.

    Each kind is its own walk of object_state_idx (state, created_at): an OR across the
    joined tables would read every registry row, deleted ones included.
    """
    unpinned = Q(pinned_until__isnull=True) | Q(pinned_until__lte=now)
    retention_cutoff = now - timedelta(days=settings.OBJECT_RETENTION_DAYS)
    # An object is registered before its run finishes, so an expired one was created before
    # the cutoff too: that bound is what lets the index do the work.
    expired = StoredObject.objects.filter(
        unpinned, state=ObjectState.REFERENCED, created_at__lt=retention_cutoff, run__finished_at__lt=retention_cutoff
    )
    # Prefilter only: the attempt is not running, or its run is not, or the lease has passed.
    cannot_publish = (
        ~Q(attempt__state=AttemptState.RUNNING) | ~Q(run__state=RunState.RUNNING) | Q(run__lease_expires_at__lte=now)
    )
    orphans = StoredObject.objects.filter(
        unpinned, cannot_publish,
        state=ObjectState.STAGED, created_at__lt=now - timedelta(seconds=settings.ORPHAN_GRACE_SECONDS),
    )
    # A `deleting` row's store deletion was not confirmed (crash, store outage): do it again.
    unconfirmed = StoredObject.objects.filter(state=ObjectState.DELETING)
    candidates: list[tuple[int, str]] = []
    # Every kind gets at least one slot (so up to limit + 2 rows in all): rows the store keeps
    # refusing cannot starve the rest.
    for rows in (expired, orphans, unconfirmed):
        share = max(1, limit - len(candidates))
        candidates += rows.order_by("created_at", "id").values_list("id", "run_id")[:share]
    return candidates


def collect_objects(*, batch_size: int | None = None) -> CleanupStats:
    stats = CleanupStats()
    now = authority_now()
    for object_id, run_id in object_candidates(now=now, limit=batch_size or settings.CLEANUP_BATCH_SIZE):
        obj = object_mark_deleting(object_id=object_id, run_id=run_id)
        if obj is None:
            continue
        stats.objects_deleting += 1
        if object_delete_marked(obj):
            stats.objects_deleted += 1
        else:
            stats.objects_failed += 1
    return stats


def object_mark_deleting(*, object_id: int, run_id: str) -> StoredObject | None:
    """Lock the run, then the registry row; mark it `deleting` if nothing can still need it.
    Returns the row when it is (now or already) `deleting`, else None."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(id=run_id).first()
        obj = StoredObject.objects.select_for_update().filter(id=object_id, run_id=run_id).first()
        if run is None or obj is None:
            return None
        if obj.state == ObjectState.DELETING:
            return obj
        now = authority_now()  # after the lock waits: a publication that won them has committed
        if obj.pinned_until is not None and obj.pinned_until > now:
            return None
        if obj.state == ObjectState.REFERENCED:
            if not reference_expired(run, obj, now):
                return None
        elif obj.state == ObjectState.STAGED:
            if not orphaned(run, obj, now):
                return None
        else:
            return None
        obj.state = ObjectState.DELETING
        obj.save(update_fields=["state"])
        return obj


def reference_expired(run: Run, obj: StoredObject, now) -> bool:
    """The canonical result is past OBJECT_RETENTION_DAYS, and no effect still waits to
    deliver it (an unsettled effect keeps it until the run's own history expires)."""
    if run.state not in TERMINAL_STATES or run.finished_at is None:
        return False
    if run.finished_at > now - timedelta(days=settings.OBJECT_RETENTION_DAYS):
        return False
    history_expired = run.finished_at <= now - timedelta(days=settings.RUN_RETENTION_DAYS)
    unsettled = EffectIntent.objects.filter(
        run=run, result_key=obj.key, state__in=(EffectState.PENDING, EffectState.UNCERTAIN)
    ).exists()
    return history_expired or not unsettled


def orphaned(run: Run, obj: StoredObject, now) -> bool:
    """A staged upload past its grace period whose attempt can no longer publish it."""
    if obj.created_at > now - timedelta(seconds=settings.ORPHAN_GRACE_SECONDS):
        return False
    return not attempt_can_publish(run, obj, now)


def attempt_can_publish(run: Run, obj: StoredObject, now) -> bool:
    """Exactly the completion's ownership check: latest fence, running attempt, live lease.
    A lease that has passed never comes back (heartbeats need a live lease)."""
    attempt = Attempt.objects.filter(id=obj.attempt_id).first()
    if attempt is None:
        return False
    try:
        require_current(run, attempt, obj.fence, now)
    except StaleFence:
        return False
    return True


def object_delete_marked(obj: StoredObject) -> bool:
    """Delete a `deleting` row's version from the store (no transaction open), then record it."""
    if obj.version_id:
        try:
            get_object_store().delete(obj.key, obj.version_id)
        except Exception as exc:  # noqa: BLE001 - store outage: the row stays `deleting` and is retried
            log.warning("cleanup: deleting %s@%s failed, will retry: %r", obj.key, obj.version_id, exc)
            return False
    # No version_id: the upload never reported back; there is no version to delete.
    with transaction.atomic():
        StoredObject.objects.filter(id=obj.id, state=ObjectState.DELETING).update(
            state=ObjectState.DELETED, deleted_at=authority_now()
        )
    return True


# --- Run history ------------------------------------------------------------------------------


def expire_run_history(*, batch_size: int | None = None) -> CleanupStats:
    """Delete terminal runs finished more than RUN_RETENTION_DAYS ago whose objects are gone.
    A run that holds (or is still named as) its schedule's active-run guard is never deleted."""
    limit = batch_size or settings.CLEANUP_BATCH_SIZE
    with transaction.atomic():
        now = authority_now()
        cutoff = now - timedelta(days=settings.RUN_RETENTION_DAYS)
        runs = (
            Run.objects.filter(state__in=TERMINAL_STATES, finished_at__lt=cutoff, holds_guard=False)
            .exclude(stored_objects__state__in=(ObjectState.STAGED, ObjectState.REFERENCED, ObjectState.DELETING))
            .exclude(id__in=Schedule.objects.filter(active_run__isnull=False).values("active_run_id"))
            .order_by("finished_at", "id")
            .select_for_update(skip_locked=True, of=("self",))
            .only("id")[:limit]
        )
        ids = [run.id for run in runs]
        if not ids:
            return CleanupStats()
        # Intents before their deliveries: the order the effect adapter locks them in.
        intents = list(EffectIntent.objects.filter(run_id__in=ids).select_for_update().values_list("id", flat=True))
        if intents:
            _delete_where(EffectDelivery, "intent_id", intents)
        # Raw deletes from here: runs and attempts point at each other (current/accepted
        # attempt), so the ORM collector would try SET NULL on a succeeded run, which its
        # check constraint forbids. Foreign keys are deferred to commit, when all are gone.
        _delete_where(EffectIntent, "run_id", ids)
        _delete_where(Outbox, "run_id", ids)
        _delete_where(StoredObject, "run_id", ids)
        _delete_where(Attempt, "run_id", ids)
        deleted = _delete_where(Run, "id", ids)
    log.info("cleanup: removed %d runs finished before %s", deleted, cutoff.isoformat())
    return CleanupStats(runs_deleted=deleted)


def _delete_where(model, column: str, values: list) -> int:
    table = connection.ops.quote_name(model._meta.db_table)
    placeholders = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {connection.ops.quote_name(column)} IN ({placeholders})", values)
        return cursor.rowcount


def expire_request_keys(*, batch_size: int | None = None) -> CleanupStats:
    """Idempotency keys are promised for 24 hours; older ones go after REQUEST_KEY_RETENTION_HOURS."""
    limit = batch_size or settings.CLEANUP_BATCH_SIZE
    with transaction.atomic():
        cutoff = authority_now() - timedelta(hours=settings.REQUEST_KEY_RETENTION_HOURS)
        ids = list(RequestKey.objects.filter(created_at__lt=cutoff).order_by("id").values_list("id", flat=True)[:limit])
        deleted = RequestKey.objects.filter(id__in=ids).delete()[0] if ids else 0
    return CleanupStats(request_keys_deleted=deleted)
