"""The hot path keeps its plans whatever the statistics say.

Two databases are planned against, each with a new tenant's wave of 10,000 queued runs
inserted after the last ANALYZE: one whose statistics were taken while the runs table was
empty (a new database's first wave), and one whose statistics were taken on a history of
1,000,000 finished runs. The second is production's case: the statistics show no queued or
running run and do not know the tenant, so every live partial index looks equally empty, and
a claim could walk any index whose predicate its condition implies. Each statement must read
the one index meant for it (models.Run says which, and why no other can serve it). On
PostgreSQL, and on the embedded SQLite when tests/runs/test_embedded_authority.py runs this
module there. The outbox's first wave, with no statistics at all, is the last test."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.authority import claim_sql
from runs.authority.materialize import _waiting_counts
from runs.authority.reserve import Reserve
from runs.authority.sweep import sweep_expired_leases
from runs.selectors import tenant_runs_page
from scheduler_project.clock import authority_now
from tests.authority_steps import create_schedule, insert_runs
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

HISTORY = 1_000_000
WAVE = 10_000
CLASSES, JOB_TYPES = ["short"], ["demo.sleep"]
RUN_ALIASES = {"runs_run", "r", "rc", "ro"}  # how the statements name runs_run (SQLite's plans say no more)


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            return json.dumps(cursor.fetchone()[0])
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return "\n".join(row[-1] for row in cursor.fetchall())


def run_scans(sql: str) -> set[str]:
    """How the statement reads runs_run: the index names, and "full scan" for a read of the table."""
    explained = plan(sql)
    if connection.vendor == "postgresql":
        nodes, reads = [json.loads(explained)[0]["Plan"]], set()
        while nodes:
            node = nodes.pop()
            nodes.extend(node.get("Plans", ()))
            if node.get("Relation Name") != "runs_run":
                continue
            if node["Node Type"] == "Bitmap Heap Scan":  # its index is named by the Bitmap Index Scan below
                reads.update(re.findall(r'"Index Name": "(\w+)"', json.dumps(node["Plans"])))
            else:
                reads.add(node.get("Index Name", "full scan"))
        return reads
    reads = set()
    for table, index in re.findall(r"(?:SCAN|SEARCH) (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", explained):
        if index.startswith(("run_", "runs_run")):
            reads.add(index)
        elif not index and table in RUN_ALIASES:
            reads.add("full scan")
    return reads


def captured(call) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        call()
    return [q["sql"] for q in queries.captured_queries if "runs_run" in q["sql"]]


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run" if connection.vendor == "postgresql" else "ANALYZE")


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
    """A new tenant's wave (queued runs due now, eight running), over ``param`` finished runs
    of another tenant that the statistics were taken on: (the new tenant, its schedule, the
    history's tenant, or the new one when there is no history)."""
    _analyze()  # what the table held before: nothing (a new database), or the history below
    if request.param:
        old = make_tenant("history")
        schedules = [create_schedule(old, name=f"h{n}").id for n in range(10)]
        ago = "now() - interval '40 days'" if connection.vendor == "postgresql" else "'now', '-40 days'"
        states = ["failed", "canceled", "skipped"]
        for n, state in enumerate(states):
            insert_runs(request.param // len(states), tenant_id=old.id, schedule_ids=schedules, state=state,
                         due=ago, extra=f"h{n}_", step=len(states), offset=n)
        _analyze()
        _assert_statistics_know_no_live_run(request.param)
    tenant = make_tenant("wave", max_active_runs=10**6)
    schedule = create_schedule(tenant, overlapPolicy="buffer_one")
    just_now = "now() - interval '4 hours'" if connection.vendor == "postgresql" else "'now', '-4 hours'"
    insert_runs(WAVE, tenant_id=tenant.id, schedule_ids=[schedule.id], state="queued", due=just_now, extra="q")
    insert_runs(8, tenant_id=tenant.id, schedule_ids=[schedule.id], state="running", due="now()" if
                 connection.vendor == "postgresql" else "'now'", extra="r")
    return tenant, schedule, old if request.param else tenant


def hot_statements(tenant, schedule, history_tenant) -> dict[str, str]:
    """Each hot statement on runs_run as the code sends it: the claim's four, the sweep's read
    of passed leases, a guarded schedule's waiting runs, a page of the history's failed runs."""
    reserve = Reserve(CLASSES, share=0.25)
    return {
        "tenant loads": captured(lambda: claim_sql.tenant_loads(CLASSES, JOB_TYPES, reserve.live_columns()))[0],
        "recount": captured(lambda: claim_sql.recount([tenant.id], reserve.running_columns()))[0],
        "candidates": captured(lambda: claim_sql.lock_candidates(tenant.id, CLASSES, JOB_TYPES, [], 32))[0],
        "claimable probe": captured(lambda: claim_sql.claimable_exists(CLASSES, JOB_TYPES))[0],
        "passed leases": captured(sweep_expired_leases)[0],
        "waiting runs": captured(lambda: _waiting_counts([schedule]))[0],
        "failed runs page": captured(lambda: tenant_runs_page(
            tenant=history_tenant, states=["failed"], upper_bound=authority_now(), after=None, limit=50))[0],
    }


PLANS = {
    "tenant loads": {"run_claimable_strict_idx", "run_running_idx"},
    "recount": {"run_running_idx"},
    "candidates": {"run_claimable_strict_idx"},
    "claimable probe": {"run_claimable_strict_idx"},
    "passed leases": {"run_running_idx"},
    "waiting runs": {"run_unfinished_idx"},
    "failed runs page": {"run_finished_state_idx"},
}


# Committed, and the tables emptied after (TRUNCATE): a rolled-back million rows would stay in
# the test database's runs table as dead rows (its server runs without autovacuum), and
# ANALYZE's row count, written in place, would outlive the rollback.
@pytest.mark.django_db(transaction=True)
def test_hot_path__each_statement_reads_the_index_meant_for_it(wave):
    tenant, schedule, history_tenant = wave
    plans = {name: run_scans(sql) for name, sql in hot_statements(tenant, schedule, history_tenant).items()}
    assert plans == PLANS


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

    with CaptureQueriesContext(connection) as captured_queries:
        claim_sql.mark_dispatched([f"run_{i:026d}" for i in range(32)])
    [statement] = [q["sql"] for q in captured_queries.captured_queries]

    explained = plan(statement)
    assert "Seq Scan" not in explained, explained
    assert "runs_outbox_run_id" in explained, explained
