"""Migration runs.0018 (the live indexes) on a database that already holds history, as a
deployment meets it: a writer keeps inserting and finishing runs while it runs, none of its
statements waits for a lock longer than a short lock_timeout, and the indexes it leaves are
valid. On PostgreSQL, where it builds and drops indexes CONCURRENTLY."""

import threading

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.authority_steps import create_schedule, insert_runs
from tests.concurrency.harness import Session, lock_timeout

pytestmark = pytest.mark.django_db(transaction=True)  # CONCURRENTLY runs outside any transaction

BEFORE = ("runs", "0017_run_strict")
NEW = ["run_unfinished_idx", "run_finished_state_idx", "run_running_idx"]
OLD = ["run_active_idx", "run_tenant_state_idx", "run_lease_idx", "run_tenant_running_idx"]
HISTORY = 200_000


def migrate(target=None) -> None:
    """To ``target``, or to the newest migrations."""
    executor = MigrationExecutor(connection)
    executor.migrate([target] if target else executor.loader.graph.leaf_nodes())


def indexes() -> dict[str, bool]:
    """runs_run's index names and whether each is valid."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
                       " WHERE i.indrelid = 'runs_run'::regclass")
        return dict(cursor.fetchall())


def test_migration__on_a_history__writers_never_wait_and_the_indexes_are_valid(tenant):
    migrate(BEFORE)
    try:
        schedule = create_schedule(tenant)
        insert_runs(HISTORY, tenant_id=tenant.id, schedule_ids=[schedule.id], state="failed",
                    due="now() - interval '30 days'", extra="h")
        writer, stop, written, errors = Session("writer"), threading.Event(), [], []

        def write():
            with lock_timeout(0.1):
                while not stop.is_set():
                    n = len(written)
                    try:
                        insert_runs(1, tenant_id=tenant.id, schedule_ids=[schedule.id], state="queued",
                                    due="now()", extra=f"w{n}_")
                        with connection.cursor() as cursor:  # and finish it, as a completion would
                            cursor.execute("UPDATE runs_run SET state = 'failed', finished_at = now()"
                                           " WHERE id = %s", [f"run_w{n}_1"])
                    except Exception as error:  # noqa: BLE001 - a lock timeout is the finding
                        errors.append(error)
                        return
                    written.append(n)

        writing = writer.submit(write)
        try:
            migrate()
        finally:
            stop.set()
            writing.result(60)
            writer.close()

        assert errors == [] and len(written) > 0
        found = indexes()
        assert {name: found.get(name) for name in NEW} == dict.fromkeys(NEW, True)
        assert not set(OLD) & set(found)
    finally:
        migrate()
