"""Shared set-up for benchmarks: a dedicated PostgreSQL database, migrated, emptied."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


_prepared: set[str] = set()


def django_on(database: str):
    """Point Django at ``database``: recreated and migrated on the first call of this process
    (so its schema is always the current one), emptied on every later call."""
    os.environ.setdefault("DATABASE_URL", f"postgresql://postgres@127.0.0.1:5432/{database}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if database not in _prepared:
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{database}"')
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        _prepared.add(database)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE effects_effectdelivery, effects_effectintent, runs_storedobject, runs_outbox, "
            "runs_attempt, runs_run, schedules_schedulerevision, schedules_requestkey, schedules_schedule, "
            "schedules_apitoken, schedules_tenant_allowed_job_types, schedules_tenant CASCADE"
        )


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]
