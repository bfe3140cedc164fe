"""The reads every API request makes (its token with its tenant, a run by id, the attempts and
effect intents of runs) are statements PostgreSQL prepares on the connection
(kernel.connections.server_cursor(prepared=True)): parsed and planned once, not per
request. Nothing else is prepared, and nothing at all where psycopg's prepare_threshold is
None (behind PgBouncer: tests/e2e/test_pgbouncer.py runs them through one)."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def unprepared():
    """The test's connection with no statement prepared yet."""
    connection.ensure_connection()
    connection.connection.execute("DEALLOCATE ALL")
    connection.connection._prepared.clear()  # psycopg's own record of what it prepared


def test_run_reads__prepared_once__then_executed_by_name(client, queued_run, unprepared):
    for _ in range(3):
        response = client.get(f"/api/v1/runs/{queued_run['runId']}")
        assert response.status_code == 200 and response.json()["runId"] == queued_run["runId"]

    prepared = prepared_statements()
    assert len(prepared) == 4, prepared  # three requests, each statement prepared once
    assert sum("FROM schedules_apitoken t LEFT JOIN schedules_tenant" in text for text in prepared) == 1
    assert sum("FROM runs_run r JOIN schedules_schedule" in text for text in prepared) == 1
    assert sum("FROM runs_attempt a WHERE a.run_id = ANY($1)" in text for text in prepared) == 1
    assert sum("FROM schedules_jobtype WHERE NOT enabled" in text for text in prepared) == 1  # the run is queued


def test_history_page__its_fixed_reads_prepared__the_page_itself_not(client, schedule, unprepared):
    for _ in range(3):
        client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs", {})
    response = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/runs?limit=2")
    assert response.status_code == 200 and len(response.json()["results"]) == 2

    prepared = prepared_statements()
    assert any("FROM pg_stat_activity" in text for text in prepared)  # the watermark
    assert any("FROM schedules_schedule WHERE id = $1 AND tenant_id = $2" in text for text in prepared)
    assert not any('FROM "runs_run"' in text for text in prepared)  # the ORM's page: filters vary, bound client-side


def test_prepare_threshold_none__nothing_prepared(client, queued_run, unprepared):
    """What PgBouncer's setting (configure_postgresql) leaves: the same reads, unprepared."""
    connection.connection.prepare_threshold = None
    try:
        response = client.get(f"/api/v1/runs/{queued_run['runId']}")
    finally:
        connection.connection.prepare_threshold = 5
    assert response.status_code == 200
    assert prepared_statements() == []
