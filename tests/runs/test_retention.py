"""Retention and cleanup: bounded batches, the registry protocol, ordered history removal."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from kernel.clock import authority_now
from kernel.errors import InvalidState
from objectstore import ObjectMissing, get_object_store
from runs import authority
from runs.authority.objects import objects_mark_deleting
from runs.models import Attempt, EffectDelivery, EffectIntent, ObjectState, Outbox, Run, StoredObject, TenantStorage
from runs.retention import cleanup_pass, collect_objects, count_stored_bytes
from schedules.models import RequestKey, Schedule
from tests.authority_steps import expire_lease, publish, report_schedule, stage, start_run
from tests.factories import api_client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]

EMAIL = {"email": {"to": ["sales@example.com"]}}


def published(schedule, data: bytes) -> Run:
    run = start_run(schedule)
    return publish(run, stage(run, data))


def finished_days_ago(run: Run, days: float) -> None:
    """Time passes: the run finished ``days`` ago, and its objects were uploaded just before."""
    finished = authority_now() - timedelta(days=days)
    Run.objects.filter(id=run.id).update(finished_at=finished)
    StoredObject.objects.filter(run_id=run.id).update(created_at=finished - timedelta(seconds=1))


def in_store(run_or_obj) -> bool:
    key = getattr(run_or_obj, "result_key", None) or run_or_obj.key
    version = getattr(run_or_obj, "result_version_id", None) or run_or_obj.version_id
    try:
        get_object_store().head(key, version)
        return True
    except ObjectMissing:
        return False


def settle_effects() -> None:
    EffectIntent.objects.update(state="sent")


def test_cleanup__objects_expire_first_then_history_in_order(tenant):
    schedule = report_schedule(tenant, effects=EMAIL)
    old, middle, recent = (published(schedule, f"r{i}".encode()) for i in range(3))
    intent = EffectIntent.objects.get(run=old)
    EffectDelivery.objects.create(intent=intent, number=1, started_at=authority_now(), outcome="sent")
    settle_effects()
    finished_days_ago(old, 40)
    finished_days_ago(middle, 10)
    finished_days_ago(recent, 1)

    stats = cleanup_pass()

    assert stats.objects_deleted == 2 and stats.runs_deleted == 1
    assert not Run.objects.filter(id=old.id).exists()
    for model in (EffectIntent, Outbox, Attempt, StoredObject):
        assert not model.objects.filter(run_id=old.id).exists(), model
    assert not EffectDelivery.objects.filter(intent_id=intent.id).exists()
    assert not in_store(old)
    # Past object retention, within run retention: the run and its checksum stay, the bytes go.
    assert StoredObject.objects.get(run=middle).state == ObjectState.DELETED and not in_store(middle)
    client = api_client(tenant)
    body = client.get(f"/api/v1/runs/{middle.id}").json()
    assert body["state"] == "succeeded" and body["result"]["checksum"] == middle.result_checksum
    expired = client.get(f"/api/v1/runs/{middle.id}/result")
    assert expired.status_code == 409 and expired.json()["error"]["code"] == "invalid_state"
    assert StoredObject.objects.get(run=recent).state == ObjectState.REFERENCED and in_store(recent)
    assert client.get(f"/api/v1/runs/{recent.id}/result").status_code == 200
    listed = client.get(f"/api/v1/schedules/{schedule.id}/runs").json()["results"]
    assert [r["runId"] for r in listed] == [recent.id, middle.id]
    assert cleanup_pass().as_dict() == dict.fromkeys(stats.as_dict(), 0)  # idempotent


def test_cleanup__history_cursor_survives_removal_of_runs(tenant):
    schedule = report_schedule(tenant)
    runs = [published(schedule, f"r{i}".encode()) for i in range(4)]  # oldest first
    client = api_client(tenant)
    first = client.get(f"/api/v1/schedules/{schedule.id}/runs?limit=2").json()
    assert [r["runId"] for r in first["results"]] == [runs[3].id, runs[2].id]

    for run in (runs[0], runs[2]):  # one not yet seen, one on the page already read
        finished_days_ago(run, 45)
    assert cleanup_pass().runs_deleted == 2

    second = client.get(f"/api/v1/schedules/{schedule.id}/runs?limit=2&cursor={first['nextCursor']}")
    assert second.status_code == 200
    assert [r["runId"] for r in second.json()["results"]] == [runs[1].id]
    assert second.json()["nextCursor"] is None


def test_cleanup__live_download_pin_defers_deletion_until_it_expires(tenant):
    schedule = report_schedule(tenant)
    run = published(schedule, b"pinned")
    assert api_client(tenant).get(f"/api/v1/runs/{run.id}/result").status_code == 200  # pins the version
    finished_days_ago(run, 10)

    assert collect_objects().objects_deleted == 0
    assert StoredObject.objects.get(run=run).state == ObjectState.REFERENCED and in_store(run)

    StoredObject.objects.filter(run=run).update(pinned_until=authority_now() - timedelta(seconds=1))
    assert collect_objects().objects_deleted == 1
    assert not in_store(run)


def test_cleanup__unsettled_effect_keeps_the_report_until_history_expires(tenant):
    schedule = report_schedule(tenant, effects=EMAIL)
    run = published(schedule, b"to be mailed")
    finished_days_ago(run, 10)
    assert collect_objects().objects_deleted == 0  # the email is still pending
    EffectIntent.objects.filter(run=run).update(state="uncertain")
    assert collect_objects().objects_deleted == 0  # it may still need re-sending
    finished_days_ago(run, 31)
    assert cleanup_pass().runs_deleted == 1 and not in_store(run)


def test_cleanup__orphans_collected_only_after_grace_and_only_when_unpublishable(tenant, settings):
    schedule = report_schedule(tenant)
    run = start_run(schedule)
    stale_attempt, stale_fence = run.current_attempt_id, run.fence
    orphan = stage(run, b"stale output")
    expire_lease(run.id)
    authority.sweep_expired_leases()
    current = authority.claim(worker_label="b")
    live = stage(current, b"in progress")

    assert collect_objects().objects_deleting == 0  # within the grace period
    StoredObject.objects.filter(id__in=[orphan.id, live.id]).update(
        created_at=authority_now() - timedelta(seconds=settings.ORPHAN_GRACE_SECONDS + 1)
    )
    assert collect_objects().objects_deleted == 1
    assert StoredObject.objects.get(id=orphan.id).state == ObjectState.DELETED and not in_store(orphan)
    # The current attempt's upload is old too, but its attempt can still publish it.
    assert StoredObject.objects.get(id=live.id).state == ObjectState.STAGED and in_store(live)
    publish(current, live)
    assert Run.objects.get(id=run.id).result_version_id == live.version_id
    with pytest.raises(Exception):
        publish(run, orphan, attempt_id=stale_attempt, fence=stale_fence)


def test_cleanup__upload_of_a_lease_that_passed_is_an_orphan_before_the_sweeper_runs(tenant, settings):
    settings.ORPHAN_GRACE_SECONDS = 0
    run = start_run(report_schedule(tenant))
    obj = stage(run, b"too late")
    expire_lease(run.id)  # no sweep: the attempt is still "running", but its lease has passed
    assert collect_objects().objects_deleted == 1
    assert StoredObject.objects.get(id=obj.id).state == ObjectState.DELETED


def test_publication__rejects_a_deleting_row(tenant):
    # Defence in depth: even if cleanup's view of time were wrong, publication refuses the row.
    run = start_run(report_schedule(tenant))
    obj = stage(run, b"contested")
    StoredObject.objects.filter(id=obj.id).update(state=ObjectState.DELETING)
    with pytest.raises(InvalidState, match="deleting"):
        publish(run, obj)
    assert Run.objects.get(id=run.id).state == "running"


def test_cleanup__never_removes_active_runs_or_a_schedules_guard_holder(tenant):
    schedule = report_schedule(tenant)
    guarded = published(schedule, b"a")
    running = start_run(schedule)
    finished_days_ago(guarded, 40)
    Run.objects.filter(id=running.id).update(finished_at=authority_now() - timedelta(days=40))
    Schedule.objects.filter(id=schedule.id).update(active_run=guarded)  # a guard that still names it

    assert cleanup_pass().runs_deleted == 0
    assert Run.objects.filter(id__in=[guarded.id, running.id]).count() == 2


def test_cleanup__old_request_keys_expire(tenant):
    client = api_client(tenant)
    schedule = report_schedule(tenant)
    for key in ("old", "new"):
        response = client.post(f"/api/v1/schedules/{schedule.id}/runs", {}, HTTP_IDEMPOTENCY_KEY=key)
        assert response.status_code == 201
    RequestKey.objects.filter(key="old").update(created_at=authority_now() - timedelta(hours=49))
    assert cleanup_pass().request_keys_deleted == 1
    assert list(RequestKey.objects.values_list("key", flat=True)) == ["new"]


def test_cleanup__works_in_bounded_batches(tenant):
    schedule = report_schedule(tenant)
    runs = [published(schedule, f"r{i}".encode()) for i in range(5)]
    for run in runs:
        finished_days_ago(run, 10)
    assert cleanup_pass(batch_size=2, max_batches=1).objects_deleted == 2
    assert cleanup_pass(batch_size=2, max_batches=2).objects_deleted == 3
    assert StoredObject.objects.filter(state=ObjectState.DELETED).count() == 5


def test_cleanup__a_pass_goes_on_while_there_is_work_and_time__one_round_when_its_time_is_up(tenant):
    """Bounded by time, not by a count of batches: 25 runs at one per batch go in one pass
    (a pass of 20 batches left 5); with no time left, a pass does one round (a batch of each step)."""
    schedule = report_schedule(tenant)
    runs = [published(schedule, f"r{i}".encode()) for i in range(26)]
    for run in runs:
        finished_days_ago(run, 40)
    one_round = cleanup_pass(batch_size=1, max_seconds=0)
    assert (one_round.objects_deleted, one_round.runs_deleted) == (1, 1)
    rest = cleanup_pass(batch_size=1, max_seconds=600)
    assert (rest.objects_deleted, rest.runs_deleted) == (25, 25)
    assert not Run.objects.filter(id__in=[run.id for run in runs]).exists()


def test_cleanup_command__once(tenant, capsys):
    schedule = report_schedule(tenant)
    run = published(schedule, b"x")
    finished_days_ago(run, 40)
    call_command("cleanup", "--once")
    assert "runs_deleted=1" in capsys.readouterr().out
    from workers.tasks import cleanup

    assert cleanup() == dict.fromkeys(cleanup().keys(), 0)


def test_cleanup__retries_a_deletion_the_store_never_confirmed(tenant):
    # A cleanup process died between marking the row and deleting the bytes.
    run = published(report_schedule(tenant), b"half deleted")
    StoredObject.objects.filter(run=run).update(state=ObjectState.DELETING)
    assert collect_objects().objects_deleted == 1
    assert StoredObject.objects.get(run=run).state == ObjectState.DELETED and not in_store(run)


def test_cleanup__a_mixed_batch_marks_exactly_the_rows_nothing_needs(tenant, settings):
    expired = published(report_schedule(tenant, name="expired"), b"expired")
    pinned = published(report_schedule(tenant, name="pinned"), b"pinned")
    mailed = published(report_schedule(tenant, name="mailed", effects=EMAIL), b"mailed")  # its email is pending
    deleting = published(report_schedule(tenant, name="deleting"), b"deleting")
    for run in (expired, pinned, mailed, deleting):
        finished_days_ago(run, 10)
    StoredObject.objects.filter(run=pinned).update(pinned_until=authority_now() + timedelta(hours=1))
    StoredObject.objects.filter(run=deleting).update(state=ObjectState.DELETING)
    run = start_run(report_schedule(tenant, name="staged"))
    orphan = stage(run, b"stale output")
    expire_lease(run.id)
    authority.sweep_expired_leases()
    live = stage(authority.claim(worker_label="b"), b"in progress")
    StoredObject.objects.filter(id__in=[orphan.id, live.id]).update(
        created_at=authority_now() - timedelta(seconds=settings.ORPHAN_GRACE_SECONDS + 1))
    rows = {name: StoredObject.objects.get(run=run) for name, run in
            [("expired", expired), ("pinned", pinned), ("mailed", mailed), ("deleting", deleting)]}
    rows |= {"orphan": orphan, "live": live}

    marked = objects_mark_deleting([(obj.id, obj.run_id) for obj in rows.values()] + [(0, expired.id)])

    assert sorted(obj.id for obj in marked) == sorted(rows[name].id for name in ("expired", "orphan", "deleting"))
    states = {name: StoredObject.objects.get(id=obj.id).state for name, obj in rows.items()}
    assert states == {"expired": "deleting", "pinned": "referenced", "mailed": "referenced", "deleting": "deleting",
                      "orphan": "deleting", "live": "staged"}
    assert objects_mark_deleting([]) == []


def test_cleanup__a_store_failure_leaves_its_row_deleting__the_rest_deleted_and_taken_off(tenant, monkeypatch):
    schedule = report_schedule(tenant)
    runs = [published(schedule, b"x" * size) for size in (10, 200, 3000)]
    for run in runs:
        finished_days_ago(run, 10)
    count_stored_bytes()
    store = get_object_store()
    refused = StoredObject.objects.get(run=runs[1])
    delete_many = store.delete_many

    def failing_one(items):
        answers = delete_many([item for item in items if item != (refused.key, refused.version_id)])
        return [RuntimeError("store outage") if item == (refused.key, refused.version_id) else answers.pop(0)
                for item in items]

    monkeypatch.setattr(store, "delete_many", failing_one)
    stats = collect_objects()

    assert (stats.objects_deleting, stats.objects_deleted, stats.objects_failed) == (3, 2, 1)
    assert {obj.run_id: obj.state for obj in StoredObject.objects.all()} == {
        runs[0].id: "deleted", runs[1].id: "deleting", runs[2].id: "deleted"}
    assert in_store(runs[1]) and not in_store(runs[0]) and not in_store(runs[2])
    assert TenantStorage.objects.get(tenant=tenant).stored_bytes == 200

    monkeypatch.undo()
    assert collect_objects().objects_deleted == 1  # a later pass retries it
    assert TenantStorage.objects.get(tenant=tenant).stored_bytes == 0 and not in_store(runs[1])


def test_cleanup__statements_of_a_batch_do_not_grow_with_its_objects(tenant):
    schedule = report_schedule(tenant)
    counts = []
    for size in (1, 8):
        for i in range(size):
            finished_days_ago(published(schedule, f"{size}-{i}".encode()), 10)
        count_stored_bytes()
        with CaptureQueriesContext(connection) as queries:
            assert collect_objects().objects_deleted == size
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts


def test_cleanup__waits_while_a_wave_is_queued_and_due__then_goes_on(tenant, settings):
    settings.CLEANUP_YIELD_BACKLOG = 3
    schedule = report_schedule(tenant)
    old = published(schedule, b"old")
    finished_days_ago(old, 40)
    wave = [authority.run_once(tenant=tenant, schedule_id=schedule.id)[0] for _ in range(3)]
    assert {run.state for run in wave} == {"queued"}

    waited = cleanup_pass(max_seconds=0.5)
    assert (waited.rounds_deferred, waited.objects_deleted, waited.runs_deleted) == (1, 0, 0)

    Run.objects.filter(id=wave[0].id).update(state="canceled", finished_at=authority_now())  # one claimed away
    done = cleanup_pass()
    assert (done.rounds_deferred, done.objects_deleted, done.runs_deleted) == (0, 1, 1)
