"""Every named statement of the authority's catalogue (runs/authority/statements/), one test
each or more: set up rows, call it, assert the rows it wrote or the values it answered,
including its guard refusing (a wrong fence, a non-running run, a paused schedule). As
River's riverdrivertest runs one suite against every driver, this module runs on PostgreSQL
and again on the embedded SQLite (tests/runs/test_embedded_authority.py lists it). A
statement written for PostgreSQL only is checked there; on SQLite its test checks the path
the authority takes instead.

Each test names the statements it covers (``@covers``); the last test fails when the
catalogue has a public function that no test names, or a test names one it does not have."""

import importlib
import json
import inspect
import pkgutil
from datetime import timedelta
from types import SimpleNamespace

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import runs.authority.statements as catalogue
from runs import authority
from runs.authority.statements import attempts, claim, completions, dialect, objects, outbox, rows, schedules, wave
from runs.authority.statements import runs as run_statements
from runs.authority.staging import result_key
from runs.models import Attempt, EffectIntent, Outbox, OutboxKind, Run, RunState, StoredObject, TenantStorage
from schedules.models import DEFAULT_CONCURRENCY_LIMIT, ConcurrencyLimit, OccurrenceDirective, Schedule
from kernel.clock import authority_now
from tests import plans
from tests.authority_steps import create_schedule, expire_lease, make_due, publish, report_schedule, stage, start_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]

COVERED: set[str] = set()


def covers(*names):
    """The statements a test runs, by name (module.function)."""
    COVERED.update(names)
    return lambda test: test


def queued_run(tenant, **schedule_kw) -> Run:
    """One due instant materialized: a queued run with its unpublished dispatch intent."""
    schedule = create_schedule(tenant, **schedule_kw)
    instant = make_due(schedule)
    authority.materialize_due()
    return Run.objects.get(schedule=schedule, scheduled_at=instant)


def upload_item(run, *, fence=None, attempt_id=None):
    key = result_key(run.id, attempt_id or run.current_attempt_id)
    return SimpleNamespace(key=key, run_id=run.id, attempt_id=attempt_id or run.current_attempt_id,
                           fence=run.fence if fence is None else fence, content_type="text/csv", worker_token_id=None)


# rows

@covers("rows.transition")
def test_transition__writes_in_the_expected_state__refuses_another(tenant):
    run = start_run(create_schedule(tenant))
    rows.transition(run, {"state": RunState.RUNNING}, pending_reason="checked")
    assert Run.objects.get(id=run.id).pending_reason == "checked" and run.pending_reason == "checked"
    with pytest.raises(rows.TransitionConflict):
        rows.transition(run, {"state": RunState.QUEUED}, pending_reason="never")
    assert Run.objects.get(id=run.id).pending_reason == "checked"


@covers("rows.bulk_set")
def test_bulk_set__writes_loaded_rows_back_by_primary_key(tenant):
    first, second = queued_run(tenant, name="a"), queued_run(tenant, name="b")
    first.pending_reason, second.pending_reason = "one", "two"
    missing = SimpleNamespace(id="run_missing", pending_reason="none")
    rows.bulk_set(Run, [first, second, missing], ["pending_reason"])
    rows.bulk_set(Run, [], ["pending_reason"])
    assert dict(Run.objects.values_list("id", "pending_reason")) == {first.id: "one", second.id: "two"}


@covers("rows.transition_each")
def test_transition_each__writes_rows_each_still_in_its_loaded_state__refuses_if_one_is_not(tenant):
    referenced = stage(start_run(create_schedule(tenant, name="a")), b"a")
    staged = stage(start_run(create_schedule(tenant, name="b")), b"b")
    StoredObject.objects.filter(id=referenced.id).update(state="referenced")
    referenced.state = "referenced"
    rows.transition_each(StoredObject, [referenced, staged], "state", state="deleting")
    assert set(StoredObject.objects.values_list("state", flat=True)) == {"deleting"}
    assert referenced.state == staged.state == "deleting"
    staged.state = "staged"  # as loaded before another write: the statement refuses all of it
    with pytest.raises(rows.TransitionConflict):
        rows.transition_each(StoredObject, [referenced, staged], "state", state="deleted")
    rows.transition_each(StoredObject, [], "state", state="deleted")


# schedules

@covers("schedules.schedules_lock_due")
def test_schedules_lock_due__due_in_buckets__not_excluded_or_deleted(tenant):
    schedule = create_schedule(tenant)
    make_due(schedule)
    now = authority_now()
    assert schedules.schedules_lock_due(["id"], [schedule.bucket], now, 10) == [(schedule.id,)]
    assert schedules.schedules_lock_due(["id"], [schedule.bucket], now, 10, exclude=[schedule.id]) == []
    assert schedules.schedules_lock_due(["id"], [schedule.bucket], now - timedelta(hours=1), 10) == []
    Schedule.objects.filter(id=schedule.id).update(deleted_at=now)
    assert schedules.schedules_lock_due(["id"], [schedule.bucket], now, 10) == []


@covers("schedules.schedules_lock_due_among")
def test_schedules_lock_due_among__only_the_ids_given_and_due(tenant):
    schedule, other = create_schedule(tenant, name="a"), create_schedule(tenant, name="b")
    make_due(schedule), make_due(other)
    now = authority_now()
    assert schedules.schedules_lock_due_among(["id"], [schedule.id], now, 10) == [(schedule.id,)]
    assert schedules.schedules_lock_due_among(["id"], [schedule.id], now, 10, exclude=[schedule.id]) == []
    Schedule.objects.filter(id=schedule.id).update(deleted_at=now)
    assert schedules.schedules_lock_due_among(["id"], [schedule.id], now, 10) == []


@covers("schedules.schedules_lock_live")
def test_schedules_lock_live__unpaused_undeleted_among_ids(tenant):
    schedule, paused = create_schedule(tenant, name="a"), create_schedule(tenant, name="b")
    Schedule.objects.filter(id=paused.id).update(paused=True, next_run_at=None)
    assert schedules.schedules_lock_live(["id", "revision"], [schedule.id, paused.id]) == [
        (schedule.id, schedule.revision)]


@covers("schedules.schedules_lock_of_runs")
def test_schedules_lock_of_runs__locks_the_runs_schedules_where_rows_lock(tenant):
    run = queued_run(tenant)
    sent = plans.statements(lambda: schedules.schedules_lock_of_runs([run.id]))
    if dialect.locks_rows():
        [(sql, params, _)] = sent
        assert sql.endswith("ORDER BY id FOR NO KEY UPDATE") and params == [dialect.pg_array([run.id])]
    else:
        assert sent == []


# claim

@covers("claim.runs_claimable_exist")
def test_runs_claimable_exist__queued_and_due_in_the_classes_and_types(tenant):
    run = queued_run(tenant)
    assert claim.runs_claimable_exist([run.resource_class])
    assert claim.runs_claimable_exist([run.resource_class], [run.job_type])
    assert not claim.runs_claimable_exist([run.resource_class], [])
    assert not claim.runs_claimable_exist(["no-such-class"])
    Run.objects.filter(id=run.id).update(due_at=authority_now() + timedelta(hours=1))
    assert not claim.runs_claimable_exist([run.resource_class])


@covers("claim.tenants_read_loads", "claim.live_slots", "claim.running_ordinary")
def test_tenants_read_loads__tenants_with_claimable_work_and_extra_columns(tenant):
    run = queued_run(tenant)
    rc = run.resource_class
    extra = [claim.live_slots(rc), claim.running_ordinary(rc)]
    [row] = claim.tenants_read_loads([rc], None, extra)
    assert row[0] == tenant.id and row[3] is not None and row[5] == 0 and tuple(row[7:]) == (0, 0)
    assert claim.tenants_read_loads(["no-such-class"], None, extra) == []
    authority.claim(worker_label="w")
    assert claim.tenants_read_loads([rc], None, [claim.running_ordinary(rc)]) == []  # nothing queued left
    [(tenant_id, running, ordinary)] = claim.tenants_recount([tenant.id], [claim.running_ordinary(rc)])
    assert (tenant_id, running, ordinary) == (tenant.id, 1, 1)


@covers("claim.resource_classes_lock_reserved")
def test_resource_classes_lock_reserved__one_advisory_lock_per_class_on_postgresql():
    claim.resource_classes_lock_reserved(["default", "gpu"])
    if dialect.postgresql():
        locks = dialect.fetch("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s"
                              " AND pid = pg_backend_pid()", [claim.RESERVE_LOCK_SPACE])
        assert locks == [(2,)]


@covers("claim.tenants_lock")
def test_tenants_lock__the_ids_locked(tenant):
    assert claim.tenants_lock([tenant.id], skip_locked=False) == {tenant.id}
    assert claim.tenants_lock([tenant.id, "tnt_missing"], skip_locked=True) == {tenant.id}
    assert claim.tenants_lock([], skip_locked=True) == set()


@covers("claim.tenants_recount")
def test_tenants_recount__running_count_of_each_tenant(tenant):
    assert claim.tenants_recount([tenant.id], []) == [(tenant.id, 0)]
    start_run(create_schedule(tenant))
    assert claim.tenants_recount([tenant.id], []) == [(tenant.id, 1)]
    assert claim.tenants_recount([], []) == []


@covers("claim.keys_read_rooms", "claim.keys_read_limits")
def test_keys_read_rooms_and_limits__running_attempts_against_each_keys_limit(tenant):
    start_run(create_schedule(tenant, concurrencyKey="k"))
    assert claim.keys_read_limits(tenant.id, ["k"]) == {}
    assert claim.keys_read_rooms(tenant.id) == {"k": DEFAULT_CONCURRENCY_LIMIT - 1}
    ConcurrencyLimit.objects.create(tenant=tenant, key="k", max_running=3)
    assert claim.keys_read_limits(tenant.id, ["k", "other"]) == {"k": 3}
    assert claim.keys_read_rooms(tenant.id) == {"k": 2}


@covers("claim.runs_lock_candidates")
def test_runs_lock_candidates__claimable_runs_less_closed_classes_and_full_keys(tenant):
    run = queued_run(tenant, concurrencyKey="k")
    rc = run.resource_class
    assert [r.id for r in claim.runs_lock_candidates(tenant.id, [rc], None, [], 10)] == [run.id]
    assert [r.id for r in claim.runs_lock_candidates(tenant.id, [rc], [run.job_type], [], 10)] == [run.id]
    assert claim.runs_lock_candidates(tenant.id, [rc], None, [rc], 10) == []  # an ordinary run of a closed class
    assert claim.runs_lock_candidates(tenant.id, [rc], None, [], 10, full_keys=["k"]) == []
    assert claim.runs_lock_candidates(tenant.id, [rc], None, [], 0) == []
    Run.objects.filter(id=run.id).update(state=RunState.PENDING)
    assert claim.runs_lock_candidates(tenant.id, [rc], None, [], 10) == []


@covers("claim.schedules_lock_for_claim")
def test_schedules_lock_for_claim__the_claims_fields_by_id(tenant):
    schedule = create_schedule(tenant, concurrencyKey="k")
    locked = claim.schedules_lock_for_claim({schedule.id})
    assert list(locked) == [schedule.id]
    assert locked[schedule.id].concurrency_key == "k" and locked[schedule.id].overlap_policy == schedule.overlap_policy


@covers("claim.attempts_insert")
def test_attempts_insert__every_column_as_given(tenant):
    run = start_run(create_schedule(tenant))
    current = Attempt.objects.get(id=run.current_attempt_id)
    new = Attempt(run_id=run.id, number=current.number + 1, fence=current.fence + 1, worker_label="again",
                  lease_seconds=30, started_at=current.started_at, lease_expires_at=current.lease_expires_at)
    claim.attempts_insert([new])
    claim.attempts_insert([])
    stored = Attempt.objects.get(id=new.id)
    assert (stored.number, stored.fence, stored.worker_label, stored.lease_seconds, stored.started_at) == (
        current.number + 1, current.fence + 1, "again", 30, current.started_at)


# wave

@covers("wave.schedules_read_live_among")
def test_schedules_read_live_among__live_schedules_with_a_next_instant(tenant):
    schedule, paused = create_schedule(tenant, name="a"), create_schedule(tenant, name="b")
    Schedule.objects.filter(id=paused.id).update(paused=True, next_run_at=None)
    assert wave.schedules_read_live_among(["id"], [schedule.id, paused.id]) == [(schedule.id,)]
    Schedule.objects.filter(id=schedule.id).update(next_run_at=None)
    assert wave.schedules_read_live_among(["id"], [schedule.id]) == []


@covers("wave.revisions_read_payloads")
def test_revisions_read_payloads__grouped_by_payload_of_the_revision_named(tenant):
    first, second = create_schedule(tenant, name="a"), create_schedule(tenant, name="b")
    [(text, ids)] = wave.revisions_read_payloads({first.id: first.revision})
    assert ids == [first.id] and isinstance(json.loads(text), dict)
    assert sorted(len(ids) for _, ids in wave.revisions_read_payloads(
        {first.id: first.revision, second.id: second.revision})) == [1, 1]  # two payloads, one schedule each
    assert wave.revisions_read_payloads({first.id: first.revision + 1}) == []


@covers("wave.directives_read_live_at")
def test_directives_read_live_at__live_directives_of_the_pairs(tenant):
    schedule = create_schedule(tenant)
    instant = make_due(schedule)
    assert wave.directives_read_live_at([(schedule.id, instant)]) == {}
    directive = OccurrenceDirective.objects.create(schedule=schedule, tenant=tenant, instant=instant, action="skip",
                                                   note="n", created_at=instant, actor_kind="api", actor="t")
    assert wave.directives_read_live_at([(schedule.id, instant)]) == {(schedule.id, instant): ("skip", "n")}
    assert wave.directives_read_live_at([(schedule.id, instant + timedelta(seconds=1))]) == {}
    OccurrenceDirective.objects.filter(id=directive.id).update(orphaned_at=instant)
    assert wave.directives_read_live_at([(schedule.id, instant)]) == {}


@covers("wave.bulk_insert")
def test_bulk_insert__rows_as_given_defaults_filling_the_rest(tenant):
    run = queued_run(tenant)
    now = authority_now()
    wave.bulk_insert(Outbox, [{"kind": OutboxKind.DISPATCH, "action_key": f"k-{i}", "run_id": run.id,
                               "created_at": now} for i in range(3)])
    wave.bulk_insert(Outbox, [])
    inserted = Outbox.objects.filter(action_key__startswith="k-")
    assert sorted(inserted.values_list("action_key", "publish_attempts", "resource_class")) == [
        (f"k-{i}", 0, "") for i in range(3)]


@covers("wave.schedules_write_wave_if_unchanged")
def test_schedules_write_wave_if_unchanged__writes_only_schedules_still_as_read(tenant):
    schedule = create_schedule(tenant)
    if not dialect.postgresql():  # PostgreSQL only: the embedded SQLite never arms a timer
        assert authority.arm([schedule.id]) == {}
        return
    row = Schedule.objects.get(id=schedule.id)
    moved = row.next_run_at + timedelta(days=1)
    stale = [(row.id, row.revision + 1, row.next_run_at, row.directive_seq)]
    assert wave.schedules_write_wave_if_unchanged([], [], stale, [(row.id, moved, 0)]) == []
    expected = [(row.id, row.revision, row.next_run_at, row.directive_seq)]
    assert wave.schedules_write_wave_if_unchanged([], [], expected, [(row.id, moved, 1)]) == [row.id]
    after = Schedule.objects.get(id=schedule.id)
    assert (after.next_run_at, after.occurrences_materialized) == (moved, row.occurrences_materialized + 1)


# objects

@covers("objects.objects_register_if_owned")
def test_objects_register_if_owned__the_owner_registers__a_stale_fence_does_not(tenant):
    run = start_run(create_schedule(tenant))
    assert objects.objects_register_if_owned([upload_item(run, fence=run.fence + 1)]) == {}
    item = upload_item(run)
    [(key, (object_id, created_at))] = objects.objects_register_if_owned([item]).items()
    assert key == item.key and created_at.tzinfo is not None
    assert StoredObject.objects.get(id=object_id).state == "staged"
    assert objects.objects_register_if_owned([item]) == {}  # registered already
    assert objects.objects_register_if_owned([]) == {}
    assert objects.objects_register_if_owned([upload_item(run, attempt_id="att_other")]) == {}
    expire_lease(run.id)
    assert objects.objects_register_if_owned([SimpleNamespace(**{**vars(item), "key": item.key + "-2"})]) == {}


@covers("objects.objects_record_if_staged")
def test_objects_record_if_staged__records_a_version_once(tenant):
    run = start_run(create_schedule(tenant))
    [(object_id, _)] = objects.objects_register_if_owned([upload_item(run)]).values()
    version = SimpleNamespace(id=object_id, version_id="v1", checksum="c", size=3, content_type="text/csv",
                              filename="r.csv")
    assert objects.objects_record_if_staged([version]) == {object_id}
    assert objects.objects_record_if_staged([SimpleNamespace(**{**vars(version), "version_id": "v2"})]) == set()
    assert StoredObject.objects.get(id=object_id).version_id == "v1"
    assert objects.objects_record_if_staged([]) == set()


@covers("objects.runs_lock_of_objects", "objects.objects_lock_among")
def test_runs_and_objects_lock_for_cleanup__the_pairs_that_still_match(tenant):
    run, other = start_run(create_schedule(tenant, name="a")), start_run(create_schedule(tenant, name="b"))
    obj, theirs = stage(run, b"mine"), stage(other, b"theirs")
    locked = objects.runs_lock_of_objects([other.id, run.id, run.id, "run_gone"])
    assert sorted(locked) == sorted([run.id, other.id])
    assert (locked[run.id].state, locked[run.id].fence) == ("running", run.fence)
    found = objects.objects_lock_among([(theirs.id, other.id), (obj.id, run.id), (obj.id, other.id), (0, run.id)])
    assert [o.id for o in found] == sorted([obj.id, theirs.id])


@covers("objects.intents_read_unsettled", "objects.attempts_read_among")
def test_intents_read_unsettled_and_attempts_read_among__for_cleanups_checks(tenant):
    run = start_run(report_schedule(tenant, effects={"email": {"to": ["sales@example.com"]}}))
    obj = stage(run, b"report")
    publish(run, obj)
    assert objects.intents_read_unsettled([(run.id, obj.key), (run.id, "other-key"), ("run_gone", obj.key)]) == {
        (run.id, obj.key)}
    EffectIntent.objects.filter(run_id=run.id).update(state="sent")
    assert objects.intents_read_unsettled([(run.id, obj.key)]) == set()
    assert objects.intents_read_unsettled([]) == set()
    found = objects.attempts_read_among([obj.attempt_id, obj.attempt_id, "att_gone"])
    assert list(found) == [obj.attempt_id] and found[obj.attempt_id].fence == run.fence
    assert objects.attempts_read_among([]) == {}


@covers("objects.objects_lock_deleting", "objects.tenants_take_off_storage")
def test_objects_lock_deleting_and_take_off_storage__only_rows_still_deleting(tenant):
    deleting = stage(start_run(create_schedule(tenant, name="a")), b"12345")
    staged = stage(start_run(create_schedule(tenant, name="b")), b"xy")
    StoredObject.objects.filter(id=deleting.id).update(state="deleting", counted=True)
    assert objects.objects_lock_deleting([staged.id, deleting.id]) == [(deleting.id, tenant.id, True, 5)]
    assert objects.objects_lock_deleting([]) == []
    TenantStorage.objects.create(tenant=tenant, stored_bytes=12)
    objects.tenants_take_off_storage({tenant.id: 5, "tenant_without_bytes": 0})
    assert TenantStorage.objects.get(tenant=tenant).stored_bytes == 7


# attempts

@covers("attempts.attempts_extend_leases_if_owned")
def test_attempts_extend_leases_if_owned__the_owners_leases__never_a_stale_fence(tenant):
    run = start_run(create_schedule(tenant))
    held = (run.current_attempt_id, run.fence)
    if not dialect.postgresql():  # PostgreSQL only: the embedded SQLite extends one lease at a time
        assert authority.heartbeat_many([held]) == {run.current_attempt_id: False}
        return
    before = Run.objects.get(id=run.id).lease_expires_at
    assert attempts.attempts_extend_leases_if_owned([(run.current_attempt_id, run.fence + 1)]) == {}
    assert attempts.attempts_extend_leases_if_owned([held]) == {run.current_attempt_id: False}
    assert Run.objects.get(id=run.id).lease_expires_at >= before
    assert Attempt.objects.get(id=run.current_attempt_id).lease_expires_at == Run.objects.get(
        id=run.id).lease_expires_at
    expire_lease(run.id)
    assert attempts.attempts_extend_leases_if_owned([held]) == {}  # a passed lease is not revived


# runs

@covers("runs.runs_set_progress_if_owned")
def test_runs_set_progress_if_owned__the_owner_writes__a_stale_fence_does_not(tenant):
    run = start_run(create_schedule(tenant))
    owner = {"run_id": run.id, "attempt_id": run.current_attempt_id}
    assert not run_statements.runs_set_progress_if_owned(**owner, fence=run.fence + 1, fraction=0.9, message="no")
    assert run_statements.runs_set_progress_if_owned(**owner, fence=run.fence, fraction=0.5, message="half")
    stored = Run.objects.get(id=run.id)
    assert (stored.progress_fraction, stored.progress_message, stored.progress_attempt) == (0.5, "half", 1)
    assert stored.progress_at is not None
    expire_lease(run.id)
    assert not run_statements.runs_set_progress_if_owned(**owner, fence=run.fence, fraction=0.7, message="late")


@covers("runs.runs_exist_if_owned")
def test_runs_exist_if_owned__only_for_the_owner(tenant):
    run = start_run(create_schedule(tenant))
    assert run_statements.runs_exist_if_owned(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    assert not run_statements.runs_exist_if_owned(run_id=run.id, attempt_id="att_other", fence=run.fence)
    assert not run_statements.runs_exist_if_owned(run_id=run.id, attempt_id=run.current_attempt_id,
                                                  fence=run.fence + 1)


# completions

@covers("completions.completions_lock", "completions.runs_publish_if_active")
def test_completions_lock_and_publish__read_what_completion_checks__publish_once(tenant):
    run = start_run(create_schedule(tenant))
    obj = stage(run, b"a,b\n")
    assert completions.completions_lock([run.id], ["att_other"], [obj.key]) == []
    [row] = completions.completions_lock([run.id], [run.current_attempt_id], [obj.key])
    read = dict(zip(completions.COMPLETION_FIELDS, row))
    assert (read["run_state"], read["run_fence"], read["leased"], read["object_id"], read["object_state"]) == (
        RunState.RUNNING, run.fence, True, obj.id, "staged")
    assert read["now"].tzinfo is not None and read["attempt_started_at"].tzinfo is not None
    published = [(run.id, run.current_attempt_id, obj.id, obj.key, obj.version_id, obj.checksum, obj.size,
                  obj.content_type)]
    now = authority_now()
    assert tuple(completions.runs_publish_if_active(published, now)) == (1, 1, 1)
    stored = Run.objects.get(id=run.id)
    assert (stored.state, stored.result_key, stored.accepted_attempt_id) == (
        RunState.SUCCEEDED, obj.key, run.current_attempt_id)
    assert tuple(completions.runs_publish_if_active(published, now)) == (0, 0, 0)  # nothing active, staged or running


# outbox

@covers("outbox.outbox_notify")
def test_outbox_notify__one_notification_on_postgresql(tenant):
    with CaptureQueriesContext(connection) as queries:
        outbox.outbox_notify()
    statements = [q["sql"] for q in queries.captured_queries]
    assert statements == ([f"SELECT pg_notify('{outbox.OUTBOX_CHANNEL}', '')"] if dialect.postgresql() else [])


@covers("outbox.outbox_mark_dispatched")
def test_outbox_mark_dispatched__spends_the_runs_unprocessed_intents(tenant):
    run = queued_run(tenant)
    intent = Outbox.objects.get(run_id=run.id, kind=OutboxKind.DISPATCH)
    assert intent.processed_at is None
    outbox.outbox_mark_dispatched([run.id])
    processed = Outbox.objects.get(id=intent.id).processed_at
    assert processed is not None
    outbox.outbox_mark_dispatched([run.id])  # processed already: left as it is
    assert Outbox.objects.get(id=intent.id).processed_at == processed


@covers("outbox.outbox_lease_unpublished")
def test_outbox_lease_unpublished__leases_free_unpublished_intents_once(tenant):
    run = queued_run(tenant)
    intent = Outbox.objects.get(run_id=run.id)
    now = authority_now()
    assert outbox.outbox_lease_unpublished(now, now + timedelta(seconds=30), 10) == [
        (intent.id, run.id, run.resource_class)]
    assert Outbox.objects.get(id=intent.id).publish_attempts == 1
    assert outbox.outbox_lease_unpublished(now, now + timedelta(seconds=30), 10) == []  # leased
    assert outbox.outbox_lease_unpublished(now + timedelta(seconds=31), now + timedelta(seconds=60), 10) == [
        (intent.id, run.id, run.resource_class)]


@covers("outbox.outbox_in_id_order", "outbox.outbox_set")
def test_outbox_in_id_order_and_set__write_the_rows_named(tenant):
    first, second = queued_run(tenant, name="a"), queued_run(tenant, name="b")
    ids = sorted(Outbox.objects.filter(run_id__in=[first.id, second.id]).values_list("id", flat=True))
    assert outbox.outbox_in_id_order(Outbox.objects.filter(id=ids[0])).update(last_error="x") == 1
    assert outbox.outbox_in_id_order(Outbox.objects.filter(id=ids[1]), skip_locked=True).update(
        last_error="y") == 1
    assert dict(Outbox.objects.filter(id__in=ids).values_list("id", "last_error")) == {ids[0]: "x", ids[1]: "y"}
    assert outbox.outbox_set(ids, broker_epoch="e") == 2
    assert outbox.outbox_set([max(ids) + 1000], broker_epoch="e") == 0
    assert set(Outbox.objects.filter(id__in=ids).values_list("broker_epoch", flat=True)) == {"e"}


def test_catalogue__every_statement_has_a_test():
    """The catalogue's public functions (dialect aside: the kit, not statements), by
    module.function, are exactly those the tests above name."""
    named = set()
    for info in pkgutil.iter_modules(catalogue.__path__):
        if info.name == "dialect":
            continue
        module = importlib.import_module(f"{catalogue.__name__}.{info.name}")
        named |= {f"{info.name}.{name}" for name, f in inspect.getmembers(module, inspect.isfunction)
                  if f.__module__ == module.__name__ and not name.startswith("_")}
    assert named == COVERED


def client_bound(call) -> list[bool]:
    """Whether each statement ``call`` sends is bound client-side (psycopg's ClientCursor,
    Django's own), statement by statement."""
    bound = []

    def keep(execute, sql, params, many, context):
        bound.append(isinstance(context["cursor"].cursor, psycopg.ClientCursor))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        call()
    return bound


def test_preparing__only_once_the_run_tables_hold_a_history(tenant, monkeypatch):
    """The catalogue's statements are prepared (kernel.connections.server_cursor) once every
    run table holds dialect.PREPARE_FROM_ROWS rows by pg_class, never on a small database: a
    generic plan made over a small table would read it whole as it grows. Until then they are
    bound client-side, as Django binds (server-side binding gained nothing unprepared). Here
    the bar is lowered to what the test's tables hold."""
    queued_run(tenant)

    def probe():
        return plans.statements(lambda: claim.runs_claimable_exist(["short"]))

    assert [sent.prepared for sent in probe()] == [False]
    if not dialect.postgresql():
        assert not dialect.preparing()
        return
    assert client_bound(lambda: claim.runs_claimable_exist(["short"])) == [True]  # unprepared: as Django binds
    monkeypatch.setattr(dialect, "PREPARE_FROM_ROWS", 0)
    assert [sent.prepared for sent in probe()] == [False]  # read again only after a while, or when told
    try:
        dialect.history_changed()
        [sent] = probe()
        assert sent.prepared and "r.state = 'queued'" in sent.sql  # the partial index's constant written out
        assert client_bound(lambda: claim.runs_claimable_exist(["short"])) == [False]
        assert dialect.fetch(sent.sql, sent.params) == [(1,)]
    finally:
        monkeypatch.undo()
        dialect.history_changed()
    assert [sent.prepared for sent in probe()] == [False]
