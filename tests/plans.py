"""The hot path's statements over a history, and how each reads the big tables: what
tests/runs/test_hot_path_plans.py pins and bench/hot_path_plans.py times.

A history is ``count`` finished runs of another tenant (failed, canceled and succeeded, 40
days old), each with its attempt, its stored result object and its served dispatch intent,
written set-based (a million in seconds on PostgreSQL); a wave is a new tenant's queued runs
inserted after the history was analyzed, so the statistics know none of them.
"""

from __future__ import annotations

import itertools
import json
import re
from contextlib import contextmanager
from datetime import timedelta
from typing import NamedTuple

from django.db import connection, transaction

from runs import authority
from runs.authority.statements import dialect
from workers import uploads
from runs.relay import relay_pass
from schedules.models import Schedule
from kernel.clock import authority_now
from kernel.connections import prepares
from tests.authority_steps import create_schedule, insert_runs
from tests.factories import make_tenant

# The tables that grow with history: a statement on them must read the index meant for it.
BIG_TABLES = ("runs_run", "runs_attempt", "runs_outbox", "runs_storedobject", "effects_effectintent")
UNRELATED_STATES = ("failed", "canceled", "skipped")
WAVE = 10_000


def is_postgresql() -> bool:
    return connection.vendor == "postgresql"


TABLES = "runs_run, runs_attempt, runs_outbox, runs_storedobject, effects_effectintent"


def analyze(*, vacuum: bool = False) -> None:
    """Statistics of the run tables; ``vacuum`` first (outside any transaction) removes the
    dead rows earlier tests rolled back, so that empty tables look to the planner as a new
    database's do (a table of dead pages is planned as a larger one)."""
    with connection.cursor() as cursor:
        if not is_postgresql():
            cursor.execute("ANALYZE")
        else:
            cursor.execute(f"{'VACUUM ' if vacuum else ''}ANALYZE {TABLES}")
    dialect.history_changed()  # a history analyzed: the hot path's statements are prepared from now on


def insert_history(count: int, *, related: int | None = None, name: str = "history", schedules: int = 10) -> tuple:
    """``count`` finished runs of a new tenant, by one statement per table and state: ``related``
    of them (all by default) succeeded, each with its attempt, result object and served
    dispatch intent; the others failed, canceled or skipped, with none. (The tenant, its
    schedule ids.)"""
    tenant = make_tenant(name)
    schedule_ids = [create_schedule(tenant, name=f"h{n}").id for n in range(schedules)]
    related = count if related is None else related
    with transaction.atomic():  # the succeeded runs' accepted attempts follow them
        _insert_history(tenant, schedule_ids, {"succeeded": related, **{
            state: (count - related) // len(UNRELATED_STATES) for state in UNRELATED_STATES}})
    return tenant, schedule_ids


@contextmanager
def _indexes_built_after(tables):
    """On PostgreSQL, the tables' indexes (those backing no constraint) dropped and built again
    after the block, in its transaction: one sorted build each instead of an entry per row
    inserted (twice as fast for a million runs). Foreign-key triggers are off meanwhile: the
    rows are consistent by construction."""
    if not is_postgresql():
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes AS i WHERE i.tablename = ANY(%s) AND NOT EXISTS"
            " (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = quote_ident(i.indexname)::regclass)",
            [list(tables)])
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    yield
    with connection.cursor() as cursor:
        for _, definition in indexes:
            cursor.execute(definition)


def _insert_history(tenant, schedule_ids: list[str], counts: dict[str, int]) -> None:
    with _indexes_built_after(BIG_TABLES[:4]):
        _insert_rows(tenant, schedule_ids, counts)


def _insert_rows(tenant, schedule_ids: list[str], counts: dict[str, int]) -> None:
    ago = "now() - interval '40 days'" if is_postgresql() else "'now', '-40 days'"
    for n, (state, count) in enumerate(counts.items()):
        if count:  # each state its own instants: i x 4 + n seconds after ``ago``
            insert_runs(count, tenant_id=tenant.id, schedule_ids=schedule_ids, state=state, due=ago, extra=f"h{n}_",
                        step=len(counts), offset=n, attempts=state == "succeeded")
    of_history = f"FROM runs_run AS r WHERE r.tenant_id = '{tenant.id}' AND r.state = 'succeeded'"
    attempt_id = "'att_' || substr(r.id, 5)"
    key = "'history/' || r.id || '/result.json'"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_attempt (id, run_id, number, fence, worker_label, state, lease_seconds, started_at,"
            " lease_expires_at, finished_at, error)"
            f" SELECT {attempt_id}, r.id, 1, 1, 'history', r.state, 30, r.finished_at, r.finished_at, r.finished_at, '' "
            f"{of_history}")
        cursor.execute(
            "INSERT INTO runs_storedobject (key, version_id, run_id, attempt_id, fence, state, checksum, size,"
            " content_type, filename, created_at, uploaded_at, referenced_at)"
            f" SELECT {key}, 'v1', r.id, {attempt_id}, 1, 'referenced', 'sha256:' || r.id, 96, 'application/json',"
            f" '', r.finished_at, r.finished_at, r.finished_at {of_history}")
        cursor.execute(
            "INSERT INTO runs_outbox (kind, action_key, run_id, resource_class, created_at, published_at,"
            " processed_at, publish_attempts, last_error, broker_epoch)"
            " SELECT 'dispatch', 'dispatch:' || r.id || ':1', r.id, 'short', r.due_at, r.due_at, r.due_at, 1, '',"
            f" 'history' {of_history}")


def empty_big_tables() -> None:
    """On SQLite, the big tables emptied before the test database is flushed: with foreign keys
    off, each in one step (SQLite's truncate optimization) instead of a million rows deleted
    one by one, every index entry and reference checked (15 s for the history). The flush that
    follows empties the rest as always; PostgreSQL's TRUNCATEs are quick either way. On both,
    the next statement reads again whether the tables hold a history (statements.dialect.preparing):
    the tests after find them empty."""
    dialect.history_changed()
    if is_postgresql():
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA foreign_keys = OFF")
        try:
            for table in BIG_TABLES:
                cursor.execute(f"DELETE FROM {table}")
        finally:
            cursor.execute("PRAGMA foreign_keys = ON")


def insert_wave(tenant_name: str = "wave", count: int = WAVE, running: int = 8) -> tuple:
    """A new tenant's wave after the last ANALYZE: ``count`` queued runs of one schedule due
    within the last four hours, ``running`` running ones (at least 8: the hot path claims 8
    more), and ten schedules due now (the scanner's next pass). (The tenant, the wave's schedule.)"""
    tenant = make_tenant(tenant_name, max_active_runs=10**6)
    schedule = create_schedule(tenant, overlapPolicy="allow")
    pg = is_postgresql()
    insert_runs(count, tenant_id=tenant.id, schedule_ids=[schedule.id], state="queued",
                due="now() - interval '4 hours'" if pg else "'now', '-4 hours'", extra=f"{tenant_name}_q")
    insert_runs(running, tenant_id=tenant.id, schedule_ids=[schedule.id], state="running",
                due="now()" if pg else "'now'", extra=f"{tenant_name}_r")
    due = authority_now() - timedelta(seconds=1)
    for n in range(10):
        Schedule.objects.filter(id=create_schedule(tenant, name=f"due{n}", overlapPolicy="allow").id).update(
            next_run_at=due)
    return tenant, schedule


class Sent(NamedTuple):
    """A statement as the code sent it: its text, its parameters, and whether PostgreSQL
    prepared it (kernel.connections.server_cursor), so that after a few executions it may
    keep one generic plan for all values."""
    sql: str
    params: object
    prepared: bool


def statements(call) -> list[Sent]:
    """The statements ``call`` sends that touch a big table."""
    sent = []

    def keep(execute, sql, params, many, context):
        if not many and any(table in sql for table in BIG_TABLES):
            sent.append(Sent(sql, params, prepares(context["cursor"])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        call()
    return sent


def hot_path() -> dict[str, list[Sent]]:
    """Each step of the hot path, run for real on what the database holds, and the statements
    it sent on the big tables: a scanner pass, a batch claim (tenant loads, tenant locks,
    recount, candidate lock, writes), a heartbeat, a progress report and a job's question
    whether it still owns its run, staging, the group commit, a failure through the general
    completion, the relay and the sweep of a passed lease."""
    steps: dict[str, list[Sent]] = {}
    steps["materialize"] = statements(authority.materialize_due)
    claimed: list = []
    steps["claim"] = statements(lambda: claimed.extend(authority.claim_many(n=8, worker_label="plans")))
    assert len(claimed) == 8, claimed
    held = [(r.current_attempt_id, r.fence) for r in claimed]
    steps["heartbeat"] = statements(lambda: authority.heartbeat_many(held))
    first = claimed[0]
    steps["progress"] = statements(lambda: authority.record_progress(
        run_id=first.id, attempt_id=first.current_attempt_id, fence=first.fence, fraction=0.5))
    steps["still owns"] = statements(lambda: authority.still_owns(
        run_id=first.id, attempt_id=first.current_attempt_id, fence=first.fence))
    succeeding, failing, expiring = claimed[:6], claimed[6], claimed[7]
    staged: list = []
    steps["staging"] = statements(lambda: staged.extend(uploads.stage_results(
        [authority.Upload(r.id, r.current_attempt_id, r.fence, b"{}", "application/json") for r in succeeding])))
    successes = [authority.Outcome(r.id, r.current_attempt_id, r.fence, "succeeded", obj)
                 for r, obj in zip(succeeding, staged)]
    steps["group commit"] = statements(lambda: authority.complete_many(successes))
    steps["completion"] = statements(lambda: authority.complete_many([authority.Outcome(
        failing.id, failing.current_attempt_id, failing.fence, "failed", error="boom", retryable=False)]))
    steps["relay"] = statements(lambda: relay_pass(lambda hints: None, batch_size=50))
    from runs.models import Run
    Run.objects.filter(id=expiring.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    steps["sweep"] = statements(authority.sweep_expired_leases)
    return steps


def plan(sql: str, params=None, *, generic: bool = False) -> str:
    """The plan of ``sql`` with ``params``; ``generic``: the one PostgreSQL keeps for a
    prepared statement when it stops planning each execution (plan_cache_mode =
    force_generic_plan), which knows no parameter's value."""
    with connection.cursor() as cursor:
        if not is_postgresql():
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            return "\n".join(row[-1] for row in cursor.fetchall())
        if not generic:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            return json.dumps(cursor.fetchone()[0])
        numbers = itertools.count(1)
        numbered = re.sub(r"%%|%s", lambda m: "%" if m.group() == "%%" else f"${next(numbers)}", sql)
        arguments = f"({', '.join(['%s'] * len(params))})" if params else ""
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"PREPARE plan_check AS {numbered}")
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE plan_check{arguments}", params)
            return json.dumps(cursor.fetchone()[0])
        finally:
            cursor.execute("DEALLOCATE plan_check")
            cursor.execute("RESET plan_cache_mode")


def reads(sql: str, params=None, prepared: bool = False) -> tuple[str, ...]:
    """How the statement reads the big tables, sorted: "table index" for each index read,
    "table full scan" for a read of the whole table. A ``prepared`` statement's reads in
    its generic plan too (plan() says which): a generic plan reading another index than
    the plan for the values shows as one more read."""
    found = set()
    if is_postgresql():
        for generic in (False, True) if prepared else (False,):
            found.update(_reads(json.loads(plan(sql, params, generic=generic))[0]["Plan"]))
        return tuple(sorted(found))
    explained = plan(sql, params)
    aliases = {alias: table for table, alias in re.findall(rf'"?({"|".join(BIG_TABLES)})"?(?: AS)? "?(\w+)', sql)}
    for name, how, index in re.findall(
            r"(?:SCAN|SEARCH) (\w+)(?: USING (COVERING INDEX|INDEX|INTEGER PRIMARY KEY|PRIMARY KEY)(?: (\w+))?)?",
            explained):
        table = name if name in BIG_TABLES else aliases.get(name)
        if table:
            found.add(f"{table} {index or ('primary key' if how else 'full scan')}")
    return tuple(sorted(found))


def _reads(root: dict) -> set[str]:
    """The big tables' reads of a PostgreSQL plan (its JSON's "Plan")."""
    found, nodes = set(), [root]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", ()))
        table = node.get("Relation Name")
        if table not in BIG_TABLES or node["Node Type"] in ("ModifyTable",):
            continue
        if node["Node Type"] == "Bitmap Heap Scan":  # its index is named by the Bitmap Index Scan below
            found.update(f"{table} {index}" for index in re.findall(r'"Index Name": "(\w+)"', json.dumps(node["Plans"])))
        else:
            found.add(f"{table} {node.get('Index Name', 'full scan')}")
    return found
