"""The authority's cost per run on the worker's hot path, in one process: claim, execute a
zero-second job, stage its output, complete. No Celery, no relay: what is left is the
protocol itself (fenced claim, upload, fenced completion).

    .venv/bin/python bench/hot_path.py [--runs 3000] [--batch 1 16] [--repeat 3] [--server-side-binding]

Per batch size: runs/s on one connection, process CPU per run, and statements and commits
per run. ``--server-side-binding`` turns on psycopg's server-side parameters and its
automatic preparation of repeated statements (prepare_threshold 5), which PgBouncer 1.18 in
transaction pooling cannot carry; the default is Django's client-side binding.
"""

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import django_on, median, wave  # noqa: E402


def one_pass(runs: int, batch: int) -> dict:
    from django.utils import timezone

    from runs.loops import scan_pass
    from workers.intake import claim_and_execute

    wave(runs, timezone.now() - timedelta(seconds=1), name="hot")
    while scan_pass().schedules:
        pass
    done, wall, cpu = 0, time.perf_counter(), time.process_time()
    while executed := claim_and_execute(resource_classes=["short"], worker_label="bench", limit=batch):
        done += len(executed)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert done == runs, f"{done} of {runs} executed"
    return {"rate": runs / wall, "cpu_ms": cpu / runs * 1000}


def statements_per_run(batch: int) -> tuple[float, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from runs.loops import scan_pass
    from workers.intake import claim_and_execute

    wave(batch, timezone.now() - timedelta(seconds=1), name="count")
    while scan_pass().schedules:
        pass
    with CaptureQueriesContext(connection) as queries:
        executed = claim_and_execute(resource_classes=["short"], worker_label="bench", limit=batch)
    sql = [q["sql"] for q in queries.captured_queries]
    statements = [s for s in sql if s not in ("BEGIN", "COMMIT")]
    autocommitted = [s for s in statements if not s.startswith("SELECT")]
    commits = sql.count("COMMIT") + max(0, len(autocommitted) - _in_transactions(sql))
    return len(statements) / len(executed), commits / len(executed)


def _in_transactions(sql) -> int:
    inside, count = False, 0
    for statement in sql:
        if statement == "BEGIN":
            inside = True
        elif statement == "COMMIT":
            inside = False
        elif inside and not statement.startswith("SELECT"):
            count += 1
    return count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server-side-binding", action="store_true")
    args = parser.parse_args()
    os.environ["OBJECT_STORE_URL"] = f"file://{tempfile.mkdtemp(prefix='hot-path-')}/objects"
    django_on("scheduler_hot_path")
    if args.server_side_binding:
        from django.db import connection

        connection.close()
        connection.settings_dict["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
    print(f"binding: {'server-side, prepared after 5 uses' if args.server_side_binding else 'client-side'}")
    for batch in args.batch:
        passes = [one_pass(args.runs, batch) for _ in range(args.repeat)]
        statements, commits = statements_per_run(batch)
        rates = ", ".join(f"{p['rate']:,.0f}" for p in passes)
        print(f"  batch {batch:>3}: {median([p['rate'] for p in passes]):,.0f} runs/s (median of {rates}), "
              f"CPU {median([p['cpu_ms'] for p in passes]):.2f} ms/run, "
              f"{statements:.2f} statements and {commits:.2f} commits per run")


if __name__ == "__main__":
    main()
