"""The database checks of runs.checks, against the real server: a PostgreSQL setting history
needs, turned off in this session, is a warning naming it (turned back on, it is not); this
machine's shared_buffers, below 1 GB, is a warning; a run table of a million rows without
autovacuum settings of its own is one, until the ALTER TABLE its hint names; an unreachable
database and the embedded SQLite give none."""

import os

import pytest
from django.db import connection

from runs.checks import postgresql_for_history

pytestmark = pytest.mark.django_db


def warned_settings() -> set[str]:
    return {w.msg.split()[1] for w in postgresql_for_history(None, databases=["default"]) if w.id == "runs.W001"}


def test_track_counts_off__warned_naming_it():
    with connection.cursor() as cursor:
        cursor.execute("SET track_counts = off")  # a superuser may, for its session
    try:
        assert "track_counts" in warned_settings()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET track_counts")
    assert "track_counts" not in warned_settings()


def test_check__runs_with_the_database_checks():
    from django.core.checks import run_checks

    ids = {message.id for message in run_checks(databases=["default"])}
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0]
    assert ("runs.W001" in ids) == (autovacuum != "on")


def warnings_of(check_id: str) -> list:
    return [w for w in postgresql_for_history(None, databases=["default"]) if w.id == check_id]


def test_shared_buffers__below_1_gb__warned_with_its_value():
    with connection.cursor() as cursor:  # this machine's server, as it is configured
        cursor.execute("SELECT current_setting('shared_buffers'), pg_size_bytes(current_setting('shared_buffers'))")
        value, size = cursor.fetchone()
    warned = warnings_of("runs.W002")
    assert bool(warned) == (size < 1024**3)
    if warned:
        [warning] = warned
        assert f"shared_buffers is {value}" in warning.msg
        assert "shared_buffers" in warning.hint and "docs/operations.md" in warning.hint


# Committed and emptied after (the flush's TRUNCATE): a rolled-back million rows would stay as
# dead rows, and ANALYZE's row count, written in place, would outlive the rollback.
@pytest.mark.django_db(transaction=True)
def test_run_table_of_a_million_rows__warned_until_it_has_autovacuum_settings():
    assert not warnings_of("runs.W003")  # the test database's tables are small
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_outbox (kind, action_key, resource_class, created_at, broker_epoch, publish_attempts,"
            " last_error) SELECT 'dispatch', 'filler:' || i, 'short', now(), '', 0, ''"
            " FROM generate_series(1, 1000000) AS i")
        cursor.execute("ANALYZE runs_outbox")
    [warning] = warnings_of("runs.W003")
    assert warning.msg.startswith("Table runs_outbox holds about 1,000,000 rows")
    alter, docs = warning.hint.split("; see ")
    assert alter == ("ALTER TABLE runs_outbox SET (autovacuum_vacuum_scale_factor = 0.01,"
                     " autovacuum_analyze_scale_factor = 0.005, autovacuum_vacuum_insert_scale_factor = 0.01)")
    assert "docs/operations.md" in docs
    try:
        with connection.cursor() as cursor:
            cursor.execute(alter)  # what the hint says, as it says it
        assert not warnings_of("runs.W003")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE runs_outbox RESET (autovacuum_vacuum_scale_factor,"
                           " autovacuum_analyze_scale_factor, autovacuum_vacuum_insert_scale_factor)")


def test_unreachable_database__no_warning_and_no_error():
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    unreachable = DatabaseWrapper(connections["default"].settings_dict | {"NAME": "no_such_database_here"},
                                  alias="unreachable")
    connections["unreachable"] = unreachable
    try:
        assert postgresql_for_history(None, databases=["unreachable"]) == []
    finally:
        del connections["unreachable"]
        unreachable.close()


def test_embedded_sqlite__no_database_warning(tmp_path):
    """`manage.py check --database default` on the embedded SQLite (a child process with
    nothing configured): none of these warnings, and no error."""
    import subprocess
    import sys

    from tests.e2e.embedded import UNSET
    from tests.e2e.processes import ROOT

    env = {k: v for k, v in os.environ.items() if k not in UNSET} | {"SCHEDULER_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run([sys.executable, "manage.py", "check", "--database", "default"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "runs.W00" not in done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout
