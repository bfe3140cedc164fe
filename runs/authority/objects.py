"""Object registry transitions outside publication: download pins, and the cleanup protocol.

Cleanup (docs/design.md, "Object registry") works on a batch of candidates at a time. One
transaction locks their runs, then their registry rows (the order publication uses after the
schedule), and marks `deleting` each row that no retained reference needs, no live download
pin protects, and whose uploading attempt can no longer publish it. It commits that, then
deletes the batch's versions from the store outside any transaction, then one transaction
marks the confirmed rows `deleted` (taking their bytes off their tenants' storage when
cleanup had counted them in); a row the store did not confirm stays `deleting` for a later
pass. Publication rejects rows that are not `staged`, so either publication wins the row
lock and the object is kept, or cleanup wins and publication fails: never a canonical pointer
to a deleted object.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from objectstore import get_object_store
from runs.authority.owner import require_current
from runs.authority.statements.objects import (
    attempts_read_among, intents_read_unsettled, objects_lock_among, objects_lock_deleting, runs_lock_of_objects,
    tenants_take_off_storage,
)
from runs.authority.statements.rows import transition_each
from kernel.clock import authority_now
from runs.models import TERMINAL_STATES, Attempt, ObjectState, Run, StoredObject
from kernel.errors import StaleFence

log = logging.getLogger(__name__)


def object_pin(obj: StoredObject, until) -> None:
    """Keep cleanup away from ``obj`` until ``until``; a pin only ever grows.
    The caller holds the registry row's lock (select_for_update) in its transaction."""
    if obj.pinned_until is None or obj.pinned_until < until:
        obj.pinned_until = until
        obj.save(update_fields=["pinned_until"])


def objects_mark_deleting(candidates: list[tuple[int, str]]) -> list[StoredObject]:
    """Lock the candidates' runs, then their registry rows (``(object id, run id)`` pairs,
    each in id order), and mark `deleting`, with one guarded write, every row nothing can
    still need. Returns the rows that are (now or already) `deleting`; a candidate whose run
    or row is gone, or that is still needed, is left out."""
    if not candidates:
        return []
    with transaction.atomic(durable=True):
        runs = runs_lock_of_objects([run_id for _, run_id in candidates])
        objs = [obj for obj in objects_lock_among(candidates) if obj.run_id in runs]
        now = authority_now()  # after the lock waits: a publication that won them has committed
        deleting = [obj for obj in objs if obj.state == ObjectState.DELETING]
        unpinned = [obj for obj in objs if obj.state in (ObjectState.REFERENCED, ObjectState.STAGED)
                    and (obj.pinned_until is None or obj.pinned_until <= now)]
        referenced = [obj for obj in unpinned if obj.state == ObjectState.REFERENCED]
        staged = [obj for obj in unpinned if obj.state == ObjectState.STAGED and past_grace(obj, now)]
        unsettled = intents_read_unsettled([(obj.run_id, obj.key) for obj in referenced])
        attempts = attempts_read_among([obj.attempt_id for obj in staged])
        marked = [obj for obj in referenced
                  if reference_expired(runs[obj.run_id], now, unsettled=(obj.run_id, obj.key) in unsettled)]
        marked += [obj for obj in staged
                   if not attempt_can_publish(runs[obj.run_id], attempts.get(obj.attempt_id), obj.fence, now)]
        transition_each(StoredObject, marked, "state", state=ObjectState.DELETING)
    return sorted(deleting + marked, key=lambda obj: obj.id)


def reference_expired(run: Run, now, *, unsettled: bool) -> bool:
    """The canonical result is past OBJECT_RETENTION_DAYS, and no effect still waits to
    deliver it (``unsettled``: an unsettled effect keeps it until the run's own history
    expires)."""
    if run.state not in TERMINAL_STATES or run.finished_at is None:
        return False
    if run.finished_at > now - timedelta(days=settings.OBJECT_RETENTION_DAYS):
        return False
    history_expired = run.finished_at <= now - timedelta(days=settings.RUN_RETENTION_DAYS)
    return history_expired or not unsettled


def past_grace(obj: StoredObject, now) -> bool:
    """A staged upload's grace period has passed: only then is it an orphan, and only if its
    attempt can no longer publish it (attempt_can_publish)."""
    return obj.created_at <= now - timedelta(seconds=settings.ORPHAN_GRACE_SECONDS)


def attempt_can_publish(run: Run, attempt: Attempt | None, fence: int, now) -> bool:
    """Exactly the completion's ownership check: latest fence, running attempt, live lease.
    A lease that has passed never comes back (heartbeats need a live lease)."""
    if attempt is None:
        return False
    try:
        require_current(run, attempt, fence, now)
    except StaleFence:
        return False
    return True


def objects_delete_marked(objs: list[StoredObject]) -> tuple[list[StoredObject], list[StoredObject]]:
    """Delete the versions of `deleting` rows from the store (no transaction open), then
    record the confirmed ones `deleted` in one transaction, their counted bytes off their
    tenants' storage. Returns ``(deleted, failed)``: a failed row stays `deleting` and a
    later pass tries it again."""
    # No version_id: the upload never reported back; there is no version to delete.
    versioned = [obj for obj in objs if obj.version_id]
    answers = get_object_store().delete_many([(obj.key, obj.version_id) for obj in versioned]) if versioned else []
    errors = [(obj, error) for obj, error in zip(versioned, answers) if error is not None]
    if errors:  # a store outage: those rows stay `deleting` and are retried
        (obj, error), count = errors[0], len(errors)
        log.warning("cleanup: deleting %d of %d versions failed, will retry (first %s@%s: %r)",
                    count, len(versioned), obj.key, obj.version_id, error)
    refused = {obj.id for obj, _ in errors}
    deleted = [obj for obj in objs if obj.id not in refused]
    failed = [obj for obj in objs if obj.id in refused]
    if not deleted:
        return deleted, failed
    with transaction.atomic(durable=True):
        rows = objects_lock_deleting([obj.id for obj in deleted])
        by_id = {obj.id: obj for obj in deleted}
        transition_each(StoredObject, [by_id[row[0]] for row in rows], "state",
                        state=ObjectState.DELETED, deleted_at=authority_now())
        removed: dict[str, int] = defaultdict(int)
        for _, tenant_id, counted, size in rows:
            if counted:  # its bytes leave its tenant's storage with it
                removed[tenant_id] += size
        tenants_take_off_storage(removed)
    return deleted, failed
