"""Retention over a history: how fast the oldest days go, and what removing them does to a
burst running beside it.

    .venv/bin/python bench/history.py --rows 2000000 --load-only     # the history, once
    .venv/bin/python bench/retention.py --days 1                     # the oldest day, alone
    .venv/bin/python bench/retention.py --days 1 --beside-burst      # a burst alone, then one beside retention

The history (bench/history.py) spans the 30 days before its load; --days D sets
RUN_RETENTION_DAYS and OBJECT_RETENTION_DAYS so that about the oldest D days have expired,
and retention (runs.retention.cleanup_pass, what `manage.py cleanup` runs) removes their
objects, then their runs with their attempts, objects, dispatch intents and effects. Alone, it
prints the rate, the database time per run (CPU of the database's backends) and what a day of
10,000,000 runs would take at that rate. Beside a burst, the same passes run in a process of
their own from the burst's due instant to its end; the burst's start p99 is compared with the
same burst just before, without retention. Each invocation consumes the days it removes.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, BackendsCpu, django_on

DATABASE = "scheduler_history"
DAY = 10_000_000  # the design's load: 10 M occurrences a day


def retention_days(days: float) -> int:
    """RUN_RETENTION_DAYS that leaves about the oldest ``days`` of the history past it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM now() - min(finished_at)) / 86400 FROM runs_run"
                       " WHERE finished_at IS NOT NULL")
        oldest = float(cursor.fetchone()[0] or 0)
    return max(1, int(oldest - days))


def settle_counts() -> None:
    """Count every upload's bytes first: in a deployment that happens as results arrive."""
    from runs.retention import count_stored_bytes

    while count_stored_bytes(batch_size=1000).objects_counted:
        pass


def remove(batch_size: int, stop=lambda: False) -> dict:
    """cleanup passes until one removes nothing (or ``stop()``): rows removed and time taken."""
    from runs.retention import cleanup_pass

    objects = runs = deferred = 0
    started = time.monotonic()
    while not stop():
        stats = cleanup_pass(batch_size=batch_size)
        objects += stats.objects_deleted
        runs += stats.runs_deleted
        deferred += stats.rounds_deferred
        if not (stats.objects_deleted or stats.runs_deleted or stats.objects_deleting or stats.rounds_deferred):
            break
    return {"objects": objects, "runs": runs, "seconds": time.monotonic() - started, "deferred": deferred}


def alone(args) -> None:
    backends = BackendsCpu(DATABASE)
    backends.sample()
    done = remove(args.batch_size)
    backends.sample()
    if not done["runs"]:
        raise SystemExit("nothing expired: ask for more --days")
    rate = done["runs"] / done["seconds"]
    cpu_ms = backends.total() * 1000 / done["runs"]
    print(f"retention alone: {done['runs']:,} runs and {done['objects']:,} objects in {done['seconds']:.1f} s,"
          f" {rate:,.0f} runs/s, database CPU {cpu_ms:.3f} ms/run; a day of {DAY:,} runs:"
          f" {DAY / rate / 3600:.2f} h at this rate, {DAY * cpu_ms / 1000 / 3600:.2f} h of database CPU")


def burst(args, *, beside: bool) -> dict:
    """bench/burst.py on the history; with ``beside``, retention runs from its due instant on."""
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    command = [sys.executable, str(ROOT / "bench" / "burst.py"), "--mode", "redis", "--runs", str(args.runs),
               "--workers", "2", "--concurrency", "4", "--database", DATABASE, "--keep", "--json", str(out)]
    remover = None
    if beside:
        remover = subprocess.Popen(
            [sys.executable, __file__, "--remove-for", str(args.lead_seconds + 120), "--days", str(args.days),
             "--batch-size", str(args.batch_size), "--start-after", str(args.lead_seconds)],
            env=env, stdout=subprocess.PIPE, text=True)
    subprocess.run(command, check=True, env=env)
    figures = json.loads(out.read_text())
    out.unlink()
    if remover is not None:
        remover.terminate()
        figures["removed"] = json.loads(remover.communicate()[0].strip().splitlines()[-1])
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=float, default=1.0, help="the oldest days of history to remove")
    parser.add_argument("--batch-size", type=int, default=1000, help="CLEANUP_BATCH_SIZE")
    parser.add_argument("--beside-burst", action="store_true", help="a burst alone, then one beside retention")
    parser.add_argument("--runs", type=int, default=10000, help="the burst's runs")
    parser.add_argument("--lead-seconds", type=float, default=12.0,
                        help="seconds from the burst's start to its due instant (set-up included)")
    parser.add_argument("--remove-for", type=float, help=argparse.SUPPRESS)  # the process beside a burst
    parser.add_argument("--start-after", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    django_on(DATABASE, keep=True)
    from django.conf import settings

    settings.RUN_RETENTION_DAYS = settings.OBJECT_RETENTION_DAYS = retention_days(args.days)
    if args.remove_for is not None:
        stopped = []
        signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))  # the burst ended: finish the pass
        settings.CLEANUP_PASS_SECONDS = 5  # passes as a loop makes them, short enough to stop soon
        settle_counts()
        time.sleep(args.start_after)
        until = time.monotonic() + args.remove_for
        done = remove(args.batch_size, stop=lambda: stopped or time.monotonic() > until)
        print(json.dumps(done), flush=True)
        return
    settle_counts()
    if not args.beside_burst:
        alone(args)
        return
    without = burst(args, beside=False)
    time.sleep(60)
    with_retention = burst(args, beside=True)
    removed = with_retention["removed"]
    print(f"burst alone: {without['runs_per_s']:,.0f} runs/s, start p99 {without['p99']:.1f} s;"
          f" beside retention: {with_retention['runs_per_s']:,.0f} runs/s, start p99 {with_retention['p99']:.1f} s"
          f" (p99 ratio {with_retention['p99'] / without['p99']:.2f}); retention meanwhile removed"
          f" {removed['runs']:,} runs and {removed['objects']:,} objects in {removed['seconds']:.1f} s"
          f" ({removed['deferred']} s waiting for the wave to be claimed)")


if __name__ == "__main__":
    main()
