"""A burst of N zero-second demo.sleep runs due at one instant, executed by real processes.

    .venv/bin/python bench/burst.py --mode redis [--runs 10000] [--workers 2] [--concurrency 4] [--peer]
                                    [--pool prefork|threads]
    .venv/bin/python bench/burst.py --mode embedded [--runs 10000]
    .venv/bin/python bench/burst.py --mode redis --database scheduler_history --keep   # on a loaded history
    .venv/bin/python bench/burst.py --mode redis --peer --keyed 1000   # 1,000 schedules with a key each

redis: PostgreSQL + scanner + relay + Celery workers (prefork) on Redis.
embedded: SQLite + scanner + the database-backed dispatcher (no broker), as `make run`.
Prints due-to-start lateness (p50/p99), completed runs per second, and where the time
goes: materialize (due -> row), relay (row -> hint), claim (hint -> start), execute.

Each run deletes its objects at the end. On ext4 without a journal (this project's test
machine) the next five minutes of file creation pay for that: run it five minutes apart
(BENCHMARKS.md, seventh session).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _setup import (  # noqa: E402
    SERVER, BackendsCpu, busy_cpu_seconds, cpu_by_command, median, percentile, tree_cpu_seconds, wave,
)


def configure(mode, var_dir, args):
    os.environ["SCHEDULER_VAR_DIR"] = str(var_dir)
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["DJANGO_SETTINGS_MODULE"] = "scheduler_project.settings"
    os.environ["OBJECT_STORE_URL"] = f"file://{var_dir}/objects"
    if mode == "redis":
        os.environ["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")  # flushed
        import redis

        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
        from _setup import django_on

        django_on(args.database, keep=args.keep)
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("REDIS_URL", None)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def start(mode, args, env, log_dir):
    py = sys.executable
    commands = {"scan": [py, "manage.py", "scan"]}
    if mode == "redis":
        commands["relay"] = [py, "manage.py", "relay"]
        for i in range(args.workers):
            commands[f"worker{i}"] = [py, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short",
                                      "-c", str(args.concurrency), "-P", args.pool, "-n", f"bench{i}@%h",
                                      "--without-gossip",
                                      "--without-mingle", "-l", "warning"]
    else:
        commands["dispatch"] = [py, "manage.py", "dispatch", "--pools", f"short={args.concurrency}"]
    return {name: subprocess.Popen(c, cwd=ROOT, env=env, stdout=open(log_dir / f"{name}.log", "w"),
                                   stderr=subprocess.STDOUT) for name, c in commands.items()}


def row_updates(*, settle: float = 0.0) -> dict[str, tuple[int, int]]:
    """Rows updated and of those HOT-updated so far in each table a run writes, as the
    statistics hold them, and the WAL written so far (bytes, as table "wal": the whole
    server's); ``settle`` seconds first, for the stopped processes' backends to report theirs
    as they exit."""
    from django.db import connection

    time.sleep(settle)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname IN"
                       " ('runs_run', 'runs_attempt', 'runs_storedobject', 'runs_outbox') ORDER BY relname")
        counts = {table: (updated, hot) for table, updated, hot in cursor.fetchall()}
        cursor.execute("SELECT pg_current_wal_lsn() - '0/0'")
        return counts | {"wal": (int(cursor.fetchone()[0]), 0)}


def own_backend() -> int:
    """The PostgreSQL backend of this script's own connection (its polling is not the burst's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["redis", "embedded"], required=True)
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (redis mode)")
    parser.add_argument("--concurrency", type=int, default=4, help="slots per worker / embedded pool")
    parser.add_argument("--pool", choices=["prefork", "threads"], default="prefork",
                        help="the Celery workers' pool (redis mode; the peer gets the same)")
    parser.add_argument("--lead", type=float, default=8.0, help="seconds between set-up and the due instant")
    parser.add_argument("--peer", action="store_true",
                        help="redis mode: then run plain Celery (a no-op task, same worker shape) and print the ratio")
    parser.add_argument("--database", default="scheduler_burst", help="redis mode: the PostgreSQL database")
    parser.add_argument("--keep", action="store_true",
                        help="redis mode: run on the database as it is (a history bench/history.py loaded), not emptied")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keyed", type=int, default=0,
                        help="this many of the schedules get a concurrency key each (limit 1, their one run never "
                             "waits): the claims' cost of reading keys")
    args = parser.parse_args()
    var_dir = Path(tempfile.mkdtemp(prefix="burst-"))
    configure(args.mode, var_dir, args)

    from django.db.models import Max, Min

    from kernel.clock import authority_now
    from runs.models import Attempt, Outbox, Run

    due = (authority_now() + timedelta(seconds=args.lead)).replace(microsecond=0)
    tenant = wave(args.runs, due, name="burst")
    if args.keyed:
        from schedules.models import Schedule, Tenant

        for n, schedule_id in enumerate(Schedule.objects.filter(tenant=tenant).order_by("id")
                                        .values_list("id", flat=True)[:args.keyed]):
            Schedule.objects.filter(id=schedule_id).update(concurrency_key=f"key-{n}")
        Tenant.objects.filter(id=tenant.id).update(uses_concurrency_keys=True)
    env = dict(os.environ)
    database = None
    if args.mode == "redis":
        from django.db import connection

        database = connection.settings_dict["NAME"]
        env["DATABASE_URL"] = f"{SERVER}/{database}"
    procs = start(args.mode, args, env, var_dir)
    try:
        deadline = time.monotonic() + args.lead + 600
        while authority_now() < due:
            time.sleep(0.05)
        busy_before, machine_before = busy_cpu_seconds(), cpu_by_command()
        updates_before = row_updates() if args.mode == "redis" else None
        cpu_before = {name: tree_cpu_seconds(p.pid) for name, p in procs.items()}
        # Sampled through the burst: a backend retired by CONN_MAX_AGE (60 s) mid-burst
        # counts for the part of its life that was seen, not for nothing.
        backends = BackendsCpu(database, exclude=frozenset([own_backend()])) if args.mode == "redis" else None
        while True:
            if backends:
                backends.sample()
            if Run.objects.filter(tenant=tenant, state="succeeded").count() >= args.runs:
                break
            if time.monotonic() > deadline:
                raise SystemExit("burst did not finish in 10 minutes")
            time.sleep(0.5)
        cpu = {name: tree_cpu_seconds(p.pid) - cpu_before[name] for name, p in procs.items()}
        if backends:
            backends.sample()
            cpu["postgres"] = backends.total()
        busy = busy_cpu_seconds() - busy_before
        machine = {name: seconds - machine_before.get(name, 0.0) for name, seconds in cpu_by_command().items()}
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait()
    updates = {table: tuple(after - before for after, before in zip(counts, updates_before[table]))
               for table, counts in row_updates(settle=1.0).items()} if updates_before else None

    runs = Run.objects.filter(tenant=tenant)
    lateness = [(r.started_at - r.scheduled_at).total_seconds() for r in runs.only("started_at", "scheduled_at")]
    materialize = [(r.created_at - r.scheduled_at).total_seconds() for r in runs.only("created_at", "scheduled_at")]
    attempts = Attempt.objects.filter(run__tenant=tenant).select_related("run")
    execute = [(a.finished_at - a.started_at).total_seconds() for a in attempts]
    span = runs.aggregate(last=Max("finished_at"), first=Min("started_at"))
    elapsed = (span["last"] - due).total_seconds()
    print(f"mode={args.mode} runs={args.runs} keyed={args.keyed} "
          + (f"celery workers={args.workers}x{args.concurrency} {args.pool}" if args.mode == "redis"
             else f"pool={args.concurrency}"))
    print(f"  due-to-start lateness: first={min(lateness) * 1000:.0f}ms p50={percentile(lateness, 50):.2f}s "
          f"p99={percentile(lateness, 99):.2f}s max={max(lateness):.2f}s")
    print(f"  throughput: {args.runs / elapsed:,.0f} runs/s completed ({elapsed:.1f}s from due instant to last completion)")
    print(f"  materialize (due -> occurrence row): median={median(materialize):.2f}s max={max(materialize):.2f}s")
    if args.mode == "redis":
        outbox = Outbox.objects.filter(run__tenant=tenant, kind="dispatch")
        relay = [(o.published_at - o.created_at).total_seconds() for o in outbox if o.published_at]
        claim = [(o.processed_at - o.published_at).total_seconds() for o in outbox if o.processed_at and o.published_at]
        print(f"  relay (row -> hint published): median={median(relay):.2f}s max={max(relay):.2f}s")
        print(f"  claim (hint -> claimed): median={median(claim):.2f}s max={max(claim):.2f}s")
    print(f"  execute (claim -> accepted completion): median={median(execute) * 1000:.1f}ms "
          f"p99={percentile(execute, 99) * 1000:.1f}ms")
    if updates:
        wal = updates.pop("wal")[0]
        print("  updates in their page (HOT) / all updates, from the due instant on: "
              + ", ".join(f"{table} {hot:,}/{updated:,}" for table, (updated, hot) in updates.items())
              + f"; WAL {wal / args.runs / 1024:.1f} KB per run (the whole server's)")
    ours = sum(cpu.values())
    parts = ", ".join(f"{name} {seconds / args.runs * 1000:.2f}" for name, seconds in cpu.items())
    print(f"  CPU per run, from the due instant to the last completion: {busy / args.runs * 1000:.2f} ms on the "
          f"machine; {parts}; the rest (Redis, this script, anything else running) {(busy - ours) / args.runs * 1000:.2f}")
    top = sorted(machine.items(), key=lambda item: -item[1])[:12]
    print("  CPU per run by command on the whole machine (the started processes included): "
          + ", ".join(f"{name} {seconds / args.runs * 1000:.2f}" for name, seconds in top))
    if args.peer and args.mode == "redis":
        from celery_peer import run_peer

        peer = run_peer(args.runs, workers=args.workers, concurrency=args.concurrency, log_dir=var_dir,
                        pool=args.pool)
        print(f"plain Celery peer, same worker shape: {peer['rate']:,.0f} tasks/s, start lateness "
              f"p50={peer['p50']:.2f}s p99={peer['p99']:.2f}s")
        print(f"  ratio this project / plain Celery: {args.runs / elapsed / peer['rate']:.3f}")
    if args.json:
        figures = {"runs_per_s": args.runs / elapsed, "p50": percentile(lateness, 50), "p99": percentile(lateness, 99),
                   "machine_cpu_ms": busy / args.runs * 1000,
                   "postgres_cpu_ms": cpu.get("postgres", 0.0) / args.runs * 1000,
                   "postgres_all_cpu_ms": sum(seconds for name, seconds in machine.items()
                                              if name.startswith("postgres")) / args.runs * 1000}
        if args.peer and args.mode == "redis":
            figures |= {"peer_per_s": peer["rate"], "ratio": args.runs / elapsed / peer["rate"]}
        args.json.write_text(json.dumps(figures))
    if args.keep:  # the wave's schedules would fire at 09:00 in a later burst on this database
        from schedules.models import Schedule

        Schedule.objects.filter(tenant=tenant).update(paused=True, next_run_at=None)
    shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
