"""The database check of runs.checks: a PostgreSQL setting history needs, turned off in this
session, is a warning naming it; turned back on, it is not."""

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
