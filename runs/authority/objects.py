"""Object registry transitions outside publication: download pins, and the cleanup protocol.

Cleanup (docs/design.md, "Object registry") locks the run, then the registry row (the order publication uses
after the schedule), and marks the row `deleting` only when no retained reference exists, no
download pin is live, and the uploading attempt can no longer publish. It commits that, then
deletes from the store outside any transaction, then marks the row `deleted` (taking its bytes
off its tenant's storage when cleanup had counted them in). Publication
rejects rows that are not `staged`, so either publication wins the row lock and the object is
kept, or cleanup wins and publication fails: never a canonical pointer to a deleted object.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from runs.models import EffectIntent, EffectState
from objectstore import get_object_store
from runs.authority.owner import require_current
from runs.authority.statements.rows import transition
from kernel.clock import authority_now
from runs.models import TERMINAL_STATES, Attempt, ObjectState, Run, StoredObject, TenantStorage
from kernel.errors import StaleFence

log = logging.getLogger(__name__)


def object_pin(obj: StoredObject, until) -> None:
    """Keep cleanup away from ``obj`` until ``until``; a pin only ever grows.
    The caller holds the registry row's lock (select_for_update) in its transaction."""
    if obj.pinned_until is None or obj.pinned_until < until:
        obj.pinned_until = until
        obj.save(update_fields=["pinned_until"])


def object_mark_deleting(*, object_id: int, run_id: str) -> StoredObject | None:
    """Lock the run, then the registry row; mark it `deleting` if nothing can still need it.
    Returns the row when it is (now or already) `deleting`, else None."""
    with transaction.atomic(durable=True):
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
        transition(obj, {"state": obj.state}, state=ObjectState.DELETING)
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
    with transaction.atomic(durable=True):
        row = StoredObject.objects.select_for_update().filter(id=obj.id, state=ObjectState.DELETING).first()
        if row is not None:
            transition(row, {"state": ObjectState.DELETING}, state=ObjectState.DELETED, deleted_at=authority_now())
            if row.counted:  # its bytes leave its tenant's storage with it
                tenant_id = Run.objects.filter(id=row.run_id).values_list("tenant_id", flat=True).get()
                TenantStorage.objects.filter(tenant_id=tenant_id).update(stored_bytes=F("stored_bytes") - row.size)
    return True
