"""The migrations from runs.0018 (the live indexes) on, on a database that already holds
history, as a deployment meets them: a writer keeps inserting and finishing runs while they
run. While a migration that builds or drops indexes CONCURRENTLY (atomic = False: each
statement on its own) runs, none of the writer's statements waits for a lock longer than a
short lock_timeout, and the indexes left are valid. The other migrations change the catalog
in one transaction (add a column, a table) and hold its lock until they commit, which is
short but, on a loaded machine, not always under the writer's 0.1 s: a wait then is allowed,
and the writer goes on."""

import itertools
import threading

import pytest
from django.db import connection
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import (
    AddConstraint, AddIndex, AlterField, RemoveConstraint, RemoveIndex, SeparateDatabaseAndState,
)

from kernel.migration_ops import OnPostgres
from tests.authority_steps import create_schedule, insert_runs
from tests.concurrency.harness import Session, lock_timeout

pytestmark = pytest.mark.django_db(transaction=True)  # CONCURRENTLY runs outside any transaction

BEFORE = ("runs", "0017_run_strict")
NEW = ["run_unfinished_idx", "run_finished_state_idx", "run_running_idx"]
OLD = ["run_active_idx", "run_tenant_state_idx", "run_lease_idx", "run_tenant_running_idx"]
HISTORY = 200_000


def migrate(target=None, applying: list | None = None) -> None:
    """To ``target``, or to the newest migrations; ``applying`` (given) holds the migration
    being applied while it is."""
    def progress(action, migration=None, fake=False):
        if applying is not None:
            applying[:] = [migration] if action == "apply_start" else []

    executor = MigrationExecutor(connection, progress_callback=progress)
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
        writer, stop, written, errors, applying = Session("writer"), threading.Event(), [], [], []

        def write():
            with lock_timeout(0.1):
                for n in itertools.count():  # a new run each time: one whose finish timed out stays queued
                    if stop.is_set():
                        return
                    try:
                        insert_runs(1, tenant_id=tenant.id, schedule_ids=[schedule.id], state="queued",
                                    due="now()", extra=f"w{n}_")
                        with connection.cursor() as cursor:  # and finish it, as a completion would
                            cursor.execute("UPDATE runs_run SET state = 'failed', finished_at = now()"
                                           " WHERE id = %s", [f"run_w{n}_1"])
                    except Exception as error:  # noqa: BLE001 - a lock timeout is the finding
                        migration = applying[0] if applying else None
                        if migration is not None and migration.atomic and "lock timeout" in str(error):
                            continue  # a catalog change's transaction: its lock, held until it commits
                        errors.append((migration, error))
                        return
                    written.append(n)

        writing = writer.submit(write)
        try:
            migrate(applying=applying)
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


# The tables that hold history: a change that reads or rewrites them under a lock blocks the
# hot path for as long as it takes.
HISTORY_TABLES = {("runs", "run"), ("runs", "attempt"), ("runs", "outbox"), ("runs", "storedobject"),
                  ("effects", "effectintent"), ("runs", "effectintent")}  # moved to runs by runs.0029
ONLINE = (AddIndexConcurrently, RemoveIndexConcurrently, OnPostgres)
BLOCKING = (AddIndex, RemoveIndex, AddConstraint, RemoveConstraint)


def blocking(operation) -> bool:
    """Builds or checks something over the table's rows. An altered field does when it is a
    foreign key (Django drops the constraint and adds it again, validating every row) or
    indexed; a wider varchar or new choices are catalog changes."""
    if isinstance(operation, ONLINE):
        return False
    if isinstance(operation, AlterField):
        return operation.field.is_relation or operation.field.db_index or operation.field.unique
    return isinstance(operation, BLOCKING)


def database_operations(migration):
    """What a migration does to the database: a SeparateDatabaseAndState's state operations do nothing there."""
    for operation in migration.operations:
        if isinstance(operation, SeparateDatabaseAndState):
            yield from operation.database_operations
        else:
            yield operation


def test_migrations_since_the_live_indexes__change_history_tables_only_online():
    """What the writer above could miss, read from the migrations themselves: from runs.0018
    on, an index or constraint of a history table, or an altered field of one (Django drops
    and adds a foreign key again, validating it), is built CONCURRENTLY or by statements of
    our own (kernel.migration_ops); a new column is a catalog change."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = []
    for (app, name), migration in loader.disk_migrations.items():
        if (app, name) <= BEFORE and app == "runs" or (app == "effects" and name < "0006"):
            continue
        for operation in database_operations(migration):
            model = getattr(operation, "model_name", None)
            if (app, model) in HISTORY_TABLES and blocking(operation):
                found.append(f"{app}.{name}: {operation.describe()}")
    assert found == []
