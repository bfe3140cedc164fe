"""What one zero-second run costs the authority, statement by statement: the figure in
BENCHMARKS.md ("Statements per run") cannot change without this test saying so."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runs import authority
from kernel.clock import authority_now
from runs.authority.statements.attempts import attempts_extend_leases_if_owned
from runs.authority.statements.outbox import outbox_lease_unpublished
from runs.capacity.live import slots_report
from tests.authority_steps import create_schedule, make_due
from workers.uploads import stage_result, stage_results

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]

# (statements, commits) of each step for one run, on PostgreSQL.
CLAIM = (9, 1)
STAGE = (2, 2)  # register the upload, then record its version after the upload
COMPLETE = (8, 1)  # `complete`, the general path (the HTTP API, outcomes other than success)


def cost(queries) -> tuple[int, int]:
    sql = [q["sql"] for q in queries.captured_queries]
    statements = [s for s in sql if s not in ("BEGIN", "COMMIT")]
    # An UPDATE outside BEGIN..COMMIT is its own (autocommit) transaction.
    commits = sql.count("COMMIT") + sum(1 for s in _outside_transactions(sql) if s not in ("BEGIN", "COMMIT"))
    return len(statements), commits


def _outside_transactions(sql):
    inside = False
    for statement in sql:
        if statement == "BEGIN":
            inside = True
        elif statement == "COMMIT":
            inside = False
        elif not inside and not statement.startswith("SELECT"):
            yield statement


def test_hot_path__statements_and_commits_per_run(tenant):
    schedule = create_schedule(tenant, overlapPolicy="allow")
    make_due(schedule)
    authority.materialize_due()

    with CaptureQueriesContext(connection) as claim:
        run = authority.claim(worker_label="w")
    ids = dict(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    with CaptureQueriesContext(connection) as stage:
        obj = stage_result(**ids, data=b"{}", content_type="application/json")
    with CaptureQueriesContext(connection) as complete:
        authority.complete(**ids, outcome="succeeded", object_key=obj.key, version_id=obj.version_id,
                           checksum=obj.checksum)

    assert (cost(claim), cost(stage), cost(complete)) == (CLAIM, STAGE, COMPLETE)


def test_heartbeat__one_statement_whatever_the_attempts_held(tenant):
    schedule = create_schedule(tenant, overlapPolicy="allow")
    for seconds in range(1, 31):
        make_due(schedule, ago=timedelta(seconds=seconds))
        authority.materialize_due()
    runs = authority.claim_many(n=30, worker_label="w")
    with CaptureQueriesContext(connection) as beat:
        alive = authority.heartbeat_many([(r.current_attempt_id, r.fence) for r in runs])
    assert len(alive) == 30 and cost(beat) == (1, 1)


def test_heartbeat__a_hot_update_of_the_run_and_the_attempt(tenant):
    """No index holds a lease (runs.models.Run says why): a heartbeat rewrites the rows in
    their pages and adds no index entry."""
    make_due(create_schedule(tenant, overlapPolicy="allow"))
    authority.materialize_due()
    run = authority.claim(worker_label="w")
    with transaction.atomic():
        before = _updates()
        assert attempts_extend_leases_if_owned([(run.current_attempt_id, run.fence)]) == {run.current_attempt_id: False}
        after = _updates()
    assert {table: (after[table][0] - updated, after[table][1] - hot) for table, (updated, hot) in before.items()} == {
        "runs_attempt": (1, 1), "runs_run": (1, 1)}


def test_an_attempts_end_and_a_relay_lease__hot_updates(tenant):
    """An attempt's end changes no indexed column (runs.0032: the expiries' index reads
    expired_at, which only the sweep writes) and its page keeps room for it (fillfactor 50):
    the group commit rewrites the attempt in its page. So does the relay's lease on a dispatch
    intent (relay_until, publish_attempts: in no index). Counted by the statistics, flushed
    across the group commit's own transaction."""
    make_due(create_schedule(tenant, overlapPolicy="allow"))
    authority.materialize_due()
    with transaction.atomic():
        before = _updates(("runs_outbox",))
        leased = outbox_lease_unpublished(authority_now(), authority_now() + timedelta(seconds=30), 10)
        after = _updates(("runs_outbox",))
    assert len(leased) == 1 and after["runs_outbox"][0] - before["runs_outbox"][0] == 1
    assert after["runs_outbox"][1] - before["runs_outbox"][1] == 1

    run = authority.claim(worker_label="w")
    staged = stage_results([authority.Upload(run.id, run.current_attempt_id, run.fence, b"{}", "application/json")])
    before = _flushed_updates()
    answers = authority.complete_many([authority.Outcome(run.id, run.current_attempt_id, run.fence, "succeeded",
                                                         staged[0])])
    after = _flushed_updates()
    assert [a.state for a in answers] == ["succeeded"]
    assert after["runs_attempt"][0] - before["runs_attempt"][0] == 1
    assert after["runs_attempt"][1] - before["runs_attempt"][1] == 1


def test_recording_an_upload__a_hot_update_of_the_object(tenant):
    """Recording an upload's version (size, checksum, version) changes no column an index of
    the registry reads (runs.0033: the index of objects to count takes them from their
    registration on), and the registry's pages keep room for it (fillfactor 65)."""
    make_due(create_schedule(tenant, overlapPolicy="allow"))
    authority.materialize_due()
    run = authority.claim(worker_label="w")
    before = _flushed_updates(("runs_storedobject",))
    staged = stage_results([authority.Upload(run.id, run.current_attempt_id, run.fence, b"{}", "application/json")])
    after = _flushed_updates(("runs_storedobject",))
    assert staged[0].size == 2
    assert after["runs_storedobject"][0] - before["runs_storedobject"][0] == 1
    assert after["runs_storedobject"][1] - before["runs_storedobject"][1] == 1


def _flushed_updates(tables=("runs_run", "runs_attempt")) -> dict[str, tuple[int, int]]:
    """Rows updated and HOT-updated in the run tables as the statistics hold them, this
    backend's counts of its committed transactions flushed in first (PostgreSQL flushes them
    as the backend goes idle; pg_stat_force_next_flush makes the next idle time do it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                       " WHERE relname = ANY(%s)", [list(tables)])
        return {table: (updated, hot) for table, updated, hot in cursor.fetchall()}


def _updates(tables=("runs_run", "runs_attempt")) -> dict[str, tuple[int, int]]:
    """Rows updated and of those HOT-updated in each table, as this backend counted so far
    (its counts not yet reported to the statistics included)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
                       " WHERE relname = ANY(%s)", [list(tables)])
        return {table: (updated, hot) for table, updated, hot in cursor.fetchall()}


# (statements, commits) of each step for a batch of 16 runs claimed by one worker process.
BATCH = 16
BATCH_CLAIM = (9, 1)
BATCH_STAGE = (2, 2)  # every upload registered by one statement, every version recorded by one
BATCH_COMPLETE = (3, 1)  # the group commit (complete_many's fast path)


def test_hot_path__a_batch_costs_the_same_statements_as_one_run(tenant):
    for i in range(BATCH):
        make_due(create_schedule(tenant, name=f"b{i}", overlapPolicy="allow"))
    authority.materialize_due()

    with CaptureQueriesContext(connection) as claim:
        runs = authority.claim_many(n=BATCH, worker_label="w")
    uploads = [authority.Upload(r.id, r.current_attempt_id, r.fence, b"{}", "application/json") for r in runs]
    with CaptureQueriesContext(connection) as stage:
        staged = stage_results(uploads)
    outcomes = [authority.Outcome(r.id, r.current_attempt_id, r.fence, "succeeded", obj) for r, obj in zip(runs, staged)]
    with CaptureQueriesContext(connection) as complete:
        answers = authority.complete_many(outcomes)  # the worker's one entry point: the group commit

    assert len(runs) == BATCH and {a.state for a in answers} == {"succeeded"}
    assert (cost(claim), cost(stage), cost(complete)) == (BATCH_CLAIM, BATCH_STAGE, BATCH_COMPLETE)


# A batch claim in a class with capacity reserved for strict runs (STRICT_RESERVED_SHARE) and
# room left for ordinary ones: one statement more, the class's advisory lock (the live slots
# and running counts ride on the tenant-loads and recount statements).
RESERVED_BATCH_CLAIM = (10, 1)


def test_hot_path__a_batch_claim_under_a_strict_reserve_costs_one_statement_more(tenant, settings):
    settings.STRICT_RESERVED_SHARE = 0.2
    slots_report("worker:test:1", {"short": 100})
    for i in range(BATCH):
        make_due(create_schedule(tenant, name=f"b{i}", overlapPolicy="allow"))
    authority.materialize_due()

    with CaptureQueriesContext(connection) as claim:
        runs = authority.claim_many(n=BATCH, worker_label="w")

    assert len(runs) == BATCH and cost(claim) == RESERVED_BATCH_CLAIM
