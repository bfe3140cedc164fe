"""runs_run keeps a tenth of each page free on PostgreSQL (runs.0030), so a history page
takes a new run only with that much room beside it. A reserve, not a wall: pages with more
room than a run and the reserve still take one (both measured in BENCHMARKS.md, "The wave on
a history" and "Where PostgreSQL's time per run goes, and the reserve's limit"). Attempts
and dispatch intents keep half of each page free (runs.0032), the object registry a third
(runs.0033), for their updates in place."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_fillfactor__runs_run_keeps_a_tenth_of_each_page_free():
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_run'")
        assert cursor.fetchall() == [(["fillfactor=90"],)]


def test_fillfactor__attempts_and_dispatch_intents_keep_half_of_each_page_free():
    """Room for every row of a page to be rewritten in it once (runs.0032): an attempt's end,
    a dispatch intent's relay lease."""
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('runs_attempt', 'runs_outbox')"
                       " ORDER BY relname")
        assert cursor.fetchall() == [("runs_attempt", ["fillfactor=50"]), ("runs_outbox", ["fillfactor=50"])]


def test_fillfactor__the_object_registry_keeps_a_third_of_each_page_free():
    """Room for a part of a page's registered objects to be rewritten in it when their upload
    is recorded (runs.0033)."""
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_storedobject'")
        assert cursor.fetchall() == [(["fillfactor=65"],)]
