"""Publication against lease expiry, the sweeper and cleanup, on the same registry row.

Each participant is a thread with its own PostgreSQL connection. The lease deadline falls
inside the window in which the worker publishes, so in some iterations publication wins the
row lock with a live lease and in others the lease passes first, cleanup marks the row
`deleting` and publication must fail. Every outcome must be one of:

- published: the run succeeded, the row is `referenced`, the exact version is in the store;
- deleted: publication raised, the row is `deleting`/`deleted`, the version is gone;

never a succeeded run whose canonical pointer names a deleted object.
"""

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection

from objectstore import ObjectMissing, get_object_store
from runs import authority
from runs.authority.objects import objects_delete_marked, objects_mark_deleting
from kernel.clock import authority_now
from runs.models import Attempt, ObjectState, Run, RunState, StoredObject
from kernel.errors import InvalidState, StaleFence
from tests.authority_steps import publish, report_schedule, stage, start_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ITERATIONS = 50
WINDOW = 0.06  # seconds: the lease ends somewhere inside the publisher's random delay


@pytest.fixture(autouse=True)
def race_settings(settings, file_objects):
    settings.ORPHAN_GRACE_SECONDS = 0  # safety must come from the locks, not from waiting


def _on_own_connection(fn):
    def wrapped():
        try:
            return fn()
        finally:
            connection.close()

    return wrapped


def _publisher(run, obj, barrier):
    def go():
        barrier.wait(10)
        time.sleep(random.uniform(0, 2 * WINDOW))
        try:
            publish(run, obj)
            return "published"
        except (StaleFence, InvalidState) as exc:
            return f"refused: {type(exc).__name__}"

    return go


def _sweeper(barrier):
    def go():
        barrier.wait(10)
        time.sleep(random.uniform(0, 2 * WINDOW))
        return authority.sweep_expired_leases()

    return go


def _cleaner(obj, barrier):
    """Cleanup's object step on this row, retried until it deletes or the row is referenced."""

    def go():
        barrier.wait(10)
        deadline = time.monotonic() + 4 * WINDOW + 1
        while time.monotonic() < deadline:
            marked = objects_mark_deleting([(obj.id, obj.run_id)])
            if marked:
                objects_delete_marked(marked)
                return "deleted"
            if StoredObject.objects.get(id=obj.id).state == ObjectState.REFERENCED:
                return "kept"
            time.sleep(0.002)
        return "gave up"

    return go


def test_publication_races_lease_expiry_and_cleanup(tenant):
    store = get_object_store()
    seen = {"published": 0, "deleted": 0}
    schedule = report_schedule(tenant)
    with ThreadPoolExecutor(max_workers=3) as pool:
        for i in range(ITERATIONS):
            run = start_run(schedule, lease_seconds=60)
            obj = stage(run, f"report {i}".encode())
            deadline = authority_now() + timedelta(seconds=WINDOW)
            Run.objects.filter(id=run.id).update(lease_expires_at=deadline)
            Attempt.objects.filter(id=run.current_attempt_id).update(lease_expires_at=deadline)

            barrier = threading.Barrier(3)
            futures = [pool.submit(_on_own_connection(fn)) for fn in
                       (_publisher(run, obj, barrier), _cleaner(obj, barrier), _sweeper(barrier))]
            publication, cleanup, _ = (f.result(30) for f in futures)

            run.refresh_from_db()
            obj.refresh_from_db()
            try:
                store.head(obj.key, obj.version_id)
                present = True
            except ObjectMissing:
                present = False
            if publication == "published":
                assert run.state == RunState.SUCCEEDED and run.result_version_id == obj.version_id
                assert obj.state == ObjectState.REFERENCED and present and cleanup == "kept", (i, cleanup)
                seen["published"] += 1
            else:
                assert run.state != RunState.SUCCEEDED and run.result_key is None, i
                assert obj.state == ObjectState.DELETED and not present and cleanup == "deleted", (i, cleanup)
                seen["deleted"] += 1
            # Never: a canonical pointer to an object that is not referenced and present.
            assert not (run.state == RunState.SUCCEEDED and (obj.state != ObjectState.REFERENCED or not present))
            _finish_for_next_iteration(run)

    # Both orderings really happened: the race is fair, not decided by the set-up.
    assert seen["published"] > 0 and seen["deleted"] > 0, seen


def _finish_for_next_iteration(run):
    """A run left without a result ends, so the schedule's guard is free for the next one."""
    run.refresh_from_db()
    if run.state == RunState.SUCCEEDED:
        return
    if run.state == RunState.RUNNING:
        authority.sweep_expired_leases()
        run.refresh_from_db()
    while run.state in (RunState.QUEUED, RunState.PENDING, RunState.RUNNING):
        Run.objects.filter(id=run.id).update(due_at=authority_now())
        authority.promote_due_runs()
        claimed = authority.claim(worker_label="janitor")
        assert claimed is not None and claimed.id == run.id
        authority.complete(run_id=run.id, attempt_id=claimed.current_attempt_id, fence=claimed.fence,
                           outcome="failed", error="race iteration over", retryable=False)
        run.refresh_from_db()
