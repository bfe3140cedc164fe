"""Retention and safe cleanup, in bounded batches (`manage.py cleanup`, task scheduler.cleanup),
and on the same pass the statistics snapshot forecasts read (runs.capacity.statistics).

Objects follow the registry protocol (docs/design.md, "Object registry"): this module finds a
batch of candidates, and `runs.authority.objects` re-checks them under lock, marks those
that qualify `deleting`, and deletes them, a batch at a time.

Run history goes only after its objects: effects, outbox, registry, attempts, then the run.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q

from kernel.clock import authority_now
from runs.authority.objects import objects_delete_marked, objects_mark_deleting
from runs.authority.statements.dialect import checked_q
from runs.authority.statements.outbox import outbox_in_id_order
from runs.capacity.statistics import refresh_snapshot
from runs.counts import Counts
from runs.models import (
    Attempt, AttemptState, EffectDelivery, EffectIntent, ObjectState, Outbox, Run, RunState, StoredObject,
    TERMINAL_STATES, TenantStorage, UNCOUNTED,
)
from schedules.models import OccurrenceDirective, RequestKey, Schedule

log = logging.getLogger(__name__)

COUNT_BATCHES = 25  # counting an object is one row's update: many per statement
YIELD_SECONDS = 1.0
HISTORY_WINDOW = 5  # expired runs read per run deleted, at most: room for a few still waiting on their objects


@dataclass
class CleanupStats(Counts):
    objects_counted: int = 0
    objects_deleting: int = 0
    objects_deleted: int = 0
    objects_failed: int = 0
    runs_deleted: int = 0
    request_keys_deleted: int = 0
    directives_deleted: int = 0
    statistics_refreshed: int = 0
    rounds_deferred: int = 0  # seconds (YIELD_SECONDS each) a pass waited for a wave to be claimed


def cleanup_pass(*, batch_size: int | None = None, max_batches: int | None = None,
                 max_seconds: float | None = None, advance=None) -> CleanupStats:
    """Rounds of one batch per step: objects first (so run history can follow), then run
    history, then request keys and directives, round after round while any step still fills
    its batch. A pass is bounded: it starts no round after ``max_seconds``
    (CLEANUP_PASS_SECONDS by default) nor past ``max_batches`` rounds. A bound of rounds alone
    capped retention at 20 batches a pass, 4,000 runs a minute at the default batch: less
    than a deployment of 10 M runs a day makes. While a wave waits to be claimed
    (`wave_waiting`), the pass starts no round: retention never competes with a burst.
    ``advance(n)``, if given, is told the rows each
    batch removed (a progress bar). Last, the statistics snapshot is measured again if it is
    due."""
    batch_size = batch_size or settings.CLEANUP_BATCH_SIZE
    deadline = time.monotonic() + (settings.CLEANUP_PASS_SECONDS if max_seconds is None else max_seconds)
    total = CleanupStats()
    steps = [count_stored_bytes, collect_objects, expire_run_history, expire_request_keys, expire_directives]
    rounds = 0
    while steps and (max_batches is None or rounds < max_batches):
        if wave_waiting():  # the hot path first: a pass a minute has the rest of the minute
            total.rounds_deferred += 1
            if time.monotonic() + YIELD_SECONDS >= deadline:
                break
            time.sleep(YIELD_SECONDS)
            continue
        rounds += 1
        for step in list(steps):
            stats = step(batch_size=batch_size)
            total.add(stats)
            if advance is not None:
                advance(stats.objects_deleted + stats.runs_deleted + stats.request_keys_deleted
                        + stats.directives_deleted)
            if not _worked(stats, batch_size):
                steps.remove(step)
        if time.monotonic() >= deadline:
            break
    total.statistics_refreshed = int(refresh_snapshot())
    return total


def wave_waiting() -> bool:
    """Whether CLEANUP_YIELD_BACKLOG runs or more are queued and due: a wave the workers are
    still claiming. Reads that many entries of run_claimable_strict_idx at most."""
    backlog = settings.CLEANUP_YIELD_BACKLOG
    if not backlog:
        return False
    queued = Run.objects.filter(state=RunState.QUEUED, due_at__lte=authority_now()).order_by()
    return queued[backlog - 1:backlog].exists()


def _worked(stats: CleanupStats, batch_size: int) -> bool:
    touched = stats.objects_deleting + stats.objects_deleted + stats.objects_failed
    return max(touched, stats.objects_counted // COUNT_BATCHES, stats.runs_deleted,
               stats.request_keys_deleted, stats.directives_deleted) >= batch_size


# --- Storage per tenant -----------------------------------------------------------------------


def count_stored_bytes(*, batch_size: int | None = None) -> CleanupStats:
    """Add recorded uploads (their size known) not counted yet (models.UNCOUNTED) to their
    tenants' storage, COUNT_BATCHES x ``batch_size`` objects per call: one transaction locks
    the objects (skipping those another transaction holds, such as a cleanup about to delete
    one), marks them counted and adds their bytes, so each object is counted exactly once and
    taken off again only if it was (runs.authority.objects.objects_delete_marked)."""
    limit = (batch_size or settings.CLEANUP_BATCH_SIZE) * COUNT_BATCHES
    with transaction.atomic(durable=True):
        rows = list(
            StoredObject.objects.filter(UNCOUNTED, size__isnull=False).order_by("id")
            .select_for_update(skip_locked=True, of=("self",)).values_list("id", "run__tenant_id", "size")[:limit]
        )
        if not rows:
            return CleanupStats()
        StoredObject.objects.filter(id__in=[object_id for object_id, _, _ in rows]).update(counted=True)
        added: dict[str, int] = defaultdict(int)
        for _, tenant_id, size in rows:
            added[tenant_id] += size
        TenantStorage.objects.bulk_create([TenantStorage(tenant_id=t) for t in added], ignore_conflicts=True)
        for tenant_id, size in sorted(added.items()):  # tenant order: two passes never wait on each other
            TenantStorage.objects.filter(tenant_id=tenant_id).update(stored_bytes=F("stored_bytes") + size)
    return CleanupStats(objects_counted=len(rows))


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
    """One batch of candidates: re-checked and marked `deleting` together, deleted from the
    store together, recorded `deleted` together (runs.authority.objects): a fixed number of
    statements whatever the batch's size."""
    marked = objects_mark_deleting(object_candidates(now=authority_now(),
                                                     limit=batch_size or settings.CLEANUP_BATCH_SIZE))
    deleted, failed = objects_delete_marked(marked)
    return CleanupStats(objects_deleting=len(marked), objects_deleted=len(deleted), objects_failed=len(failed))


# --- Run history ------------------------------------------------------------------------------


def expire_run_history(*, batch_size: int | None = None) -> CleanupStats:
    """Delete terminal runs finished more than RUN_RETENTION_DAYS ago whose objects are gone.
    A run that holds (or is still named as) its schedule's active-run guard is never deleted.

    Candidates are the oldest HISTORY_WINDOW x ``batch_size`` expired runs, read in finished_at
    order from run_ended_idx, then locked by primary key and only then checked (checked_q: no
    partial index can serve the check): a batch reads at most that many runs whatever the
    history holds. (Filtered in one statement, the planner read every run and every registry
    row of a multi-million-row history for each batch.) Runs whose objects are not collected
    yet wait at the head for a later pass, which collects objects first."""
    limit = batch_size or settings.CLEANUP_BATCH_SIZE
    with transaction.atomic():
        now = authority_now()
        cutoff = now - timedelta(days=settings.RUN_RETENTION_DAYS)
        oldest = list(Run.objects.filter(finished_at__isnull=False, finished_at__lt=cutoff)
                      .order_by("finished_at", "id").values_list("id", flat=True)[:limit * HISTORY_WINDOW])
        if not oldest:
            return CleanupStats()
        runs = (
            Run.objects.filter(checked_q(Q(state__in=TERMINAL_STATES, holds_guard=False)), id__in=oldest)
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
        # Dispatch intents locked in id order, as every writer of many of them locks them.
        outbox_in_id_order(Outbox.objects.filter(run_id__in=ids)).delete()
        # Raw deletes from here: runs and attempts point at each other (current/accepted
        # attempt), so the ORM collector would try SET NULL on a succeeded run, which its
        # check constraint forbids. Foreign keys are deferred to commit, when all are gone.
        _delete_where(EffectIntent, "run_id", ids)
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


# Directives the scanner can no longer apply: their instant has passed and the schedule is
# behind it (its first instant not yet materialized is later, or it has none), or it is
# deleted, or an edit orphaned them. A schedule's floor only moves on past an instant already
# passed, so what this reads without the schedule's lock stays true.
_BEHIND = (Q(schedule__deleted_at__isnull=False) | Q(orphaned_at__isnull=False)
           | Q(schedule__paused=False, schedule__next_run_at__isnull=True)
           | Q(schedule__paused=False, schedule__next_run_at__gt=F("instant"))
           | Q(schedule__paused=True, schedule__resume_from__isnull=True)
           | Q(schedule__paused=True, schedule__resume_from__gt=F("instant")))


def expire_directives(*, batch_size: int | None = None) -> CleanupStats:
    """Occurrence directives of past instants the scanner is behind: applied (their run
    carries what they said) or never to be applied."""
    limit = batch_size or settings.CLEANUP_BATCH_SIZE
    with transaction.atomic():
        now = authority_now()
        ids = list(OccurrenceDirective.objects.filter(_BEHIND, instant__lt=now).order_by("id")
                   .values_list("id", flat=True)[:limit])
        deleted = OccurrenceDirective.objects.filter(id__in=ids).delete()[0] if ids else 0
    return CleanupStats(directives_deleted=deleted)
