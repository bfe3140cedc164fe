"""The hot path finds its rows by index even where the planner has no statistics: a new
database's first wave runs before autovacuum ever analyzed the tables (and this test server
runs without autovacuum)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.authority import claim_sql

pytestmark = pytest.mark.django_db


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_mark_dispatched__finds_each_runs_intents_by_index_in_an_unanalyzed_outbox():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_outbox (kind, action_key, resource_class, created_at, broker_epoch, publish_attempts,"
            " last_error) SELECT 'dispatch', 'filler:' || i, 'short', now(), '', 0, ''"
            " FROM generate_series(1, 5000) AS i")
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'runs_outbox'")
        assert cursor.fetchone()[0] < 5000  # no statistics of these rows

    with CaptureQueriesContext(connection) as captured:
        claim_sql.mark_dispatched([f"run_{i:026d}" for i in range(32)])
    [statement] = [q["sql"] for q in captured.captured_queries]

    explained = plan(statement)
    assert "Seq Scan on runs_outbox" not in explained, explained
    assert "runs_outbox_run_id" in explained, explained
