"""Every hot-path statement's plan and time on a database holding a history of finished runs,
with a fresh wave the statistics have not seen: the plans tests/runs/test_hot_path_plans.py
pins, timed with EXPLAIN ANALYZE.

    .venv/bin/python bench/hot_path_plans.py --database scheduler_plans --history 2000000 [--repeat 7] [--running 8]

The history (tests/plans.py: finished runs of one tenant, each with its attempt, result object
and served dispatch intent, written set-based) is loaded once into ``--database`` and kept;
then VACUUM ANALYZE. Each invocation inserts a new tenant's wave of 10,000 queued runs after
that ANALYZE, runs the hot path once for real (scanner pass, batch claim, heartbeat, staging,
group commit, a failure, relay, sweep) capturing its statements, and prints each statement's
plan (the indexes it reads on the big tables) and its median EXPLAIN ANALYZE time over
``--repeat`` runs, each in a transaction rolled back. The wave is deleted at the end and the
tables vacuumed (not analyzed): the next invocation sees the same statistics.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import SERVER, django_on  # noqa: E402


def load(history: int) -> None:
    from django.db import connection

    from tests import plans

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM schedules_tenant WHERE name = 'history'")
        if cursor.fetchone()[0]:
            return
    started = time.monotonic()
    plans.insert_history(history)
    print(f"history of {history:,} runs loaded in {time.monotonic() - started:.1f} s", flush=True)
    vacuum(analyze=True)


def vacuum(*, analyze: bool) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/{os.environ['BENCH_DATABASE']}", autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE" if analyze else "VACUUM")


def timed(sql: str, params, repeat: int) -> float:
    """Median execution time (ms) of the statement, EXPLAIN ANALYZE'd in rolled-back transactions."""
    from django.db import connection, transaction

    times = []
    for _ in range(repeat):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
                times.append(cursor.fetchone()[0][0]["Execution Time"])
            transaction.set_rollback(True)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="scheduler_plans")
    parser.add_argument("--history", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--running", type=int, default=8, help="runs of the wave already running (workers' slots)")
    args = parser.parse_args()
    os.environ["BENCH_DATABASE"] = args.database
    os.environ["OBJECT_STORE_URL"] = f"file://{tempfile.mkdtemp(prefix='hot-path-plans-')}/objects"
    django_on(args.database, keep=True)
    from django.db import connection

    from objectstore import get_object_store
    from tests import plans

    get_object_store().ensure_ready()
    load(args.history)
    tenant, _ = plans.insert_wave(f"wave{int(time.time())}", running=args.running)
    try:
        steps = plans.hot_path()
        for step, sent in steps.items():
            for one in sent:
                if not one.sql.lstrip().upper().startswith(("SELECT", "UPDATE", "WITH", "DELETE")):
                    continue
                reads = ", ".join(plans.reads(*one)) or "-"
                print(f"{step:13} {timed(one.sql, one.params, args.repeat):9.3f} ms  {reads}\n"
                      f"{'':13} {' '.join(one.sql.split())[:110]}", flush=True)
    finally:
        from django.db import transaction

        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")  # the wave's rows in any order
            wave = "SELECT id FROM runs_run WHERE tenant_id = %s"
            for table in ("runs_outbox", "runs_storedobject", "runs_attempt", "effects_effectintent"):
                cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({wave})", [tenant.id])
            cursor.execute("DELETE FROM runs_run WHERE tenant_id = %s", [tenant.id])
        vacuum(analyze=False)


if __name__ == "__main__":
    main()
