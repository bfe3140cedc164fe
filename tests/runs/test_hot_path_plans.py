"""The hot path keeps its plans whatever the statistics say.

Two databases are planned against, each with a new tenant's wave of 10,000 queued runs
inserted after the last ANALYZE: one whose statistics were taken while the tables were empty
(a new database's first wave), and one whose statistics were taken on a history of 1,000,000
finished runs (tests.plans.insert_history). The second is production's case: the statistics
show no queued or running run and do not know the tenant, so every live partial index looks
equally empty, and a statement could walk any index whose predicate its condition implies.
Each statement must read the one index meant for it (models.Run says which, and why no other
can serve it; rows found by id are guarded through statements.dialect.checked, which says why): the
claim's statements one by one, then every step of the hot path run for real
(tests.plans.hot_path), and PostgreSQL's own foreign-key checks of a run's attempt pointers.
On PostgreSQL, and on the embedded SQLite when tests/runs/test_embedded_authority.py runs this
module there. The outbox's first wave, with no statistics at all, is the last test."""

import json
import re

import pytest
from django.db import connection, transaction

from kernel.clock import authority_now
from runs.authority.materialize import _waiting_counts
from runs.authority.reserve import Reserve
from runs.authority.statements import claim
from runs.authority.statements.outbox import outbox_mark_dispatched
from runs.authority.sweep import sweep_expired_leases
from runs.retention import expire_run_history, wave_waiting
from runs.models import Run
from runs.selectors import run_get, run_reread, tenant_runs_page
from tests import plans
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db

HISTORY = 1_000_000
RELATED = 100_000  # of them succeeded with an attempt, an object and an intent (seconds more each)
CLASSES, JOB_TYPES = ["short"], ["demo.sleep"]


def run_scans(sent: plans.Sent) -> set[str]:
    """How the statement reads runs_run: the index names (the primary key as runs_run_pkey in
    either database), and "full scan" for a read of the table."""
    return {_named(read).split(" ", 1)[1] for read in plans.reads(*sent) if read.startswith("runs_run ")}


def rolled_back(call):
    """``call`` in a transaction rolled back: what it writes is not kept."""
    def run():
        with transaction.atomic():
            call()
            transaction.set_rollback(True)
    return run


def captured(call) -> list[plans.Sent]:
    return [sent for sent in plans.statements(call) if "runs_run" in sent.sql]


def _assert_statistics_know_no_live_run(history: int) -> None:
    """The case the plans must survive: the planner expects no queued or running run at all."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'runs_run'")
        assert cursor.fetchone()[0] >= history * 0.9
        cursor.execute("SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'runs_run' AND attname = 'state'")
        [states] = cursor.fetchone()
        assert "failed" in states and "queued" not in states and "running" not in states


@pytest.fixture(params=[0, HISTORY], ids=["analyzed empty", "1M finished runs analyzed"])
def wave(request):
    """A new tenant's wave (tests.plans.insert_wave: queued runs due now, eight running, ten
    schedules due), over ``param`` finished runs of another tenant, with their attempts,
    result objects and dispatch intents, that the statistics were taken on: (the new tenant,
    its schedule, the history's tenant, or the new one when there is no history)."""
    plans.analyze(vacuum=True)  # what the tables held before: nothing (a new database), or the history below
    history_tenant = None
    if request.param:
        history_tenant, _ = plans.insert_history(request.param, related=RELATED)
        plans.analyze()
        _assert_statistics_know_no_live_run(request.param)
    tenant, _ = plans.insert_wave()
    guarded = create_schedule(tenant, name="guarded", overlapPolicy="buffer_one")
    yield tenant, guarded, history_tenant or tenant
    plans.empty_big_tables()


def hot_statements(tenant, schedule, history_tenant) -> dict[str, list[str]]:
    """Each hot statement on runs_run as the code sends it: the claim's four, the sweep's read
    of passed leases, a guarded schedule's waiting runs, a page of the history's failed runs,
    and retention's two (the oldest expired runs, then those of them it locks by id; the
    history finished 28 to 40 days ago, so much of it has expired), rolled back."""
    reserve = Reserve(CLASSES, share=0.25)
    return {
        "tenant loads": captured(lambda: claim.tenants_read_loads(CLASSES, JOB_TYPES, reserve.live_columns()))[:1],
        "recount": captured(lambda: claim.tenants_recount([tenant.id], reserve.running_columns()))[:1],
        "candidates": captured(lambda: claim.runs_lock_candidates(tenant.id, CLASSES, JOB_TYPES, [], 32))[:1],
        "claimable probe": captured(lambda: claim.runs_claimable_exist(CLASSES, JOB_TYPES))[:1],
        "passed leases": captured(sweep_expired_leases)[:1],
        "waiting runs": captured(lambda: _waiting_counts([schedule]))[:1],
        "failed runs page": captured(lambda: tenant_runs_page(
            tenant=history_tenant, states=["failed"], upper_bound=authority_now(), after=None, limit=50))[:1],
        "retention": captured(rolled_back(expire_run_history))[:2],
        "retention's wave probe": captured(wave_waiting)[:1],
    }


PLANS = {
    "tenant loads": {"run_claimable_strict_idx", "run_running_idx"},
    "recount": {"run_running_idx"},
    "candidates": {"run_claimable_strict_idx"},
    "claimable probe": {"run_claimable_strict_idx"},
    "passed leases": {"run_running_idx"},
    "waiting runs": {"run_unfinished_idx"},
    "failed runs page": {"run_finished_state_idx"},
    "retention": {"run_ended_idx", "runs_run_pkey"},
    "retention's wave probe": {"run_claimable_strict_idx"},  # the oldest expired, then those of them locked by id
}


def _named(read: str) -> str:
    """One name per way of reading: SQLite's names of primary keys as PostgreSQL's; a run's
    attempts read by attempt id or by run id (either unique index beginning with run_id)
    alike: a few entries either way, a close call."""
    table, index = read.split(" ", 1)
    if index.startswith("sqlite_autoindex_") or index == "primary key":
        index = f"{table}_pkey"
    return f"{table} {'runs_attempt_pkey' if index in ('attempt_fence_unique', 'attempt_number_unique') else index}"


def _few(steps: dict) -> dict:
    """The plans on PostgreSQL's empty database, where attempts, objects and intents are the
    wave's few dozen: read whole or by index, a close call either way, so not told apart."""
    def read(one: str) -> str:
        table = one.split(" ")[0]
        return f"{table} (few rows)" if table in ("runs_attempt", "runs_outbox", "runs_storedobject") else one
    return {step: [tuple(sorted({read(one) for one in reads})) for reads in sent] for step, sent in steps.items()}


# Each step of the hot path (tests.plans.hot_path): per statement that reads a big table, how.
# Runs found by their ids read the primary key; by state, the one partial index of the state.
PK, ATTEMPT, OBJECT, OUTBOX = "runs_run runs_run_pkey", "runs_attempt runs_attempt_pkey", \
    "runs_storedobject runs_storedobject_pkey", "runs_outbox runs_outbox_pkey"
CLAIMABLE, RUNNING = "runs_run run_claimable_strict_idx", "runs_run run_running_idx"
SWEEP = [(RUNNING,), (ATTEMPT, PK), (ATTEMPT,), (PK,)]
STEPS = {
    "postgresql": {
        "materialize": [],
        "claim": [(CLAIMABLE, RUNNING), (RUNNING,), (CLAIMABLE,), (PK,), (OUTBOX, "runs_outbox runs_outbox_run_id_9b98ca34")],
        "heartbeat": [(ATTEMPT, PK)],
        "progress": [(PK,)],
        "still owns": [(PK,)],
        "staging": [(ATTEMPT, PK), (OBJECT,)],
        "group commit": [(PK,), (ATTEMPT, PK, "runs_storedobject runs_storedobject_key_key"), (ATTEMPT, PK, OBJECT)],
        "completion": [(PK,), (PK,), (ATTEMPT,), (ATTEMPT,), (PK,)],
        "relay": [("runs_outbox outbox_unpublished_idx", OUTBOX), (OUTBOX,)],
        "sweep": SWEEP,
    },
    # One statement per attempt where PostgreSQL's take arrays; a new row's key looked up among
    # the rows that refer to it (SQLite's deferred foreign keys).
    "sqlite": {
        "materialize": [("effects_effectintent effects_effectintent_run_id_581b06ae", ATTEMPT,
                         "runs_outbox runs_outbox_run_id_9b98ca34", "runs_storedobject runs_storedobject_run_id_52759429")],
        "claim": [(CLAIMABLE, RUNNING), (RUNNING,), (CLAIMABLE,),
                  ("runs_run run_accepted_attempt_idx", "runs_run run_current_attempt_idx",
                   "runs_storedobject runs_storedobject_attempt_id_fc6ca74b"),
                  ("runs_outbox runs_outbox_run_id_9b98ca34",)],
        "heartbeat": [("runs_run run_current_attempt_idx",), *[(ATTEMPT,), (PK,), (ATTEMPT,)] * 8],
        "progress": [(PK,)],
        "still owns": [(PK,)],
        "staging": [(ATTEMPT, PK), (OBJECT,)],
        "group commit": [(ATTEMPT, PK, "runs_storedobject runs_storedobject_pkey"), (OBJECT,), (ATTEMPT,), (PK,)],
        "completion": [(PK,), (PK,), (ATTEMPT,), (ATTEMPT,), (PK,)],
        "relay": [("runs_outbox outbox_unpublished_idx",), (OUTBOX,), (OUTBOX,)],
        "sweep": SWEEP,
    },
}


# Committed, and the tables emptied after (TRUNCATE): a rolled-back million rows would stay in
# the test database's runs table as dead rows (its server runs without autovacuum), and
# ANALYZE's row count, written in place, would outlive the rollback.
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_hot_path__each_statement_reads_the_index_meant_for_it(wave, request):
    tenant, schedule, history_tenant = wave
    statements = hot_statements(tenant, schedule, history_tenant)
    # Prepared over the history, not over an empty database (statements.dialect.preparing), so
    # that there the generic plans are checked too (plans.reads).
    assert statements["candidates"][0].prepared == (connection.vendor == "postgresql" and history_tenant != tenant)
    scans = {name: set().union(*map(run_scans, sent)) for name, sent in statements.items()}
    # With no history nothing has expired: retention reads the oldest and locks none.
    assert scans == (PLANS | {"retention": {"run_ended_idx"}} if history_tenant == tenant else PLANS)
    # Then the hot path for real, step by step: how each statement that reads a big table reads it.
    steps = {step: [read for one in sent if (read := plans.reads(*one))] for step, sent in plans.hot_path().items()}
    steps = {step: [tuple(sorted({_named(read) for read in reads})) for reads in sent] for step, sent in steps.items()}
    expected = STEPS[connection.vendor]
    if history_tenant == tenant and connection.vendor == "postgresql":
        steps, expected = _few(steps), _few(expected)
    assert steps == expected
    if connection.vendor == "postgresql":
        assert foreign_key_lookups() == {"current_attempt_id": "run_current_attempt_idx",
                                         "accepted_attempt_id": "run_accepted_attempt_idx"}


def foreign_key_lookups() -> dict[str, str]:
    """The index each of PostgreSQL's foreign-key checks reads for the runs pointing at an
    attempt (its text, as ri_triggers.c writes it, when retention deletes attempts), in the
    generic plan the check keeps for every later call: a partial index on `IS NOT NULL` is
    proven usable by the strict `=` whatever the attempt id."""
    found = {}
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            for column in ("current_attempt_id", "accepted_attempt_id"):
                cursor.execute(f'PREPARE pointer_check (varchar) AS SELECT 1 FROM ONLY "public"."runs_run" x'
                               f' WHERE $1 OPERATOR(pg_catalog.=) "{column}" FOR KEY SHARE OF x')
                cursor.execute("EXPLAIN (FORMAT JSON) EXECUTE pointer_check ('att_none')")
                [explained] = cursor.fetchone()
                cursor.execute("DEALLOCATE pointer_check")
                found[column] = re.findall(r'"Index Name": "(\w+)"', json.dumps(explained)) or ["full scan"]
        finally:
            cursor.execute("RESET plan_cache_mode")
    return {column: " ".join(names) for column, names in found.items()}


def test_mark_dispatched__finds_each_runs_intents_by_index_in_an_unanalyzed_outbox():
    if connection.vendor != "postgresql":
        pytest.skip("one statement per database: SQLite's has no planner statistics to miss")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_outbox (kind, action_key, resource_class, created_at, broker_epoch, publish_attempts,"
            " last_error) SELECT 'dispatch', 'filler:' || i, 'short', now(), '', 0, ''"
            " FROM generate_series(1, 5000) AS i")
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'runs_outbox'")
        assert cursor.fetchone()[0] < 5000  # no statistics of these rows

    [sent] = plans.statements(lambda: outbox_mark_dispatched([f"run_{i:026d}" for i in range(32)]))

    explained = plans.plan(sent.sql, sent.params)
    assert "Seq Scan" not in explained, explained
    assert "runs_outbox_run_id" in explained, explained



# The API's reads that PostgreSQL prepares (kernel.connections.server_cursor): after a few
# executions it may keep one generic plan for every run, which must read what the plan for the
# run's own values reads: a run by its primary key, then its attempts by their run's (in either
# unique index beginning with run_id). Effect intents are left out: the history holds none, and
# an empty table is read whole by any plan.
API_READS = [("runs_run runs_run_pkey",), ("runs_attempt runs_attempt_pkey",)]


@pytest.mark.django_db(transaction=True)
def test_api_reads__prepared__their_generic_plans_read_the_same_indexes(wave):
    _, _, history_tenant = wave
    run = Run.objects.filter(tenant=history_tenant).order_by("-id").first()
    sent = plans.statements(lambda: run_reread(run_get(tenant=history_tenant, run_id=run.id)))
    if connection.vendor == "postgresql":
        assert [one.prepared for one in sent] == [True, True, True, True]
    reads = [tuple(sorted({_named(read) for read in plans.reads(*one) if not read.startswith("effects_")}))
             for one in sent]
    if connection.vendor == "postgresql" and run.tenant_id == wave[0].id:  # no history: the wave's few attempts
        reads, expected = _few({"api": reads})["api"], _few({"api": API_READS * 2})["api"]
    else:
        expected = API_READS * 2
    assert reads == expected
