"""Peer benchmark: celery beat (django-celery-beat DatabaseScheduler) vs scanner + relay.

    .venv/bin/python bench/peer_beat.py [--n 1000 10000 50000] [--mode both|beat|ours] [--duplicates]
                                        [--repeat 1] [--cap 240] [--directives 10]

The same workload for both systems: N cron schedules all due in the same minute, each
dispatching one no-op message to a Redis-backed Celery queue.

  beat: N PeriodicTask rows sharing ONE CrontabSchedule (``M H * * *``, UTC) for task
        ``bench.noop`` (published by name, never executed) on queue ``peer``; one
        ``celery beat -S django_celery_beat.schedulers:DatabaseScheduler`` process.
  ours: N schedules (cron ``M H * * *``, overlapPolicy allow, demo.sleep seconds=0);
        ``manage.py scan`` + ``manage.py relay`` processes; hints land on queue ``short``.

--directives P gives P % of our schedules (every 100/P-th) a `note` directive on the due
instant (occurrence directives: read by the wave's materializing transaction); a note
changes no outcome, so the expected messages stay N.

Nothing consumes the queues except this script: a thread pops the raw messages from the
Redis list and timestamps each arrival. Lateness = arrival at the broker - due instant.
Scheduler memory is the peak of the summed VmRSS of the scheduler processes (and their
children), sampled every 0.5 s. --duplicates runs two of each scheduler process and
counts messages per task (beat) and occurrences per (schedule, instant) (ours).

Nothing claims our runs, so with the default RELAY_REPUBLISH_AFTER_SECONDS=30 the relay's
lost-hint backstop resends the hints of runs still queued after 30 s (seen at N=50,000);
set it higher in the environment to measure first publication alone.

Uses its own PostgreSQL database (scheduler_peer, or $PEER_DATABASE, on the server
$BENCH_POSTGRES names, 127.0.0.1:5432 by default) and Redis DB 12 (or $PEER_REDIS_URL),
flushed before each run. Each of our measurements also prints, per run, the WAL the server
wrote, its full-page images and the pages of runs_run read from outside shared_buffers. With
--keep (our system alone) the database is used as it is, a history bench/history.py loaded:
each measurement's schedules belong to a tenant of its own, and once measured they are paused
and their runs, which nothing claims, canceled (history like the rest), so no later burst on
that database runs them.
Each measurement waits for a minute boundary: plan ~1.5 min per run at N=1,000.
"""

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _setup import SERVER, BackendsCpu, clone_schedule, median, percentile, tree_cpu_seconds  # noqa: E402

DATABASE = os.environ.get("PEER_DATABASE", "scheduler_peer")  # a database of its own: dropped first
DATABASE_URL = f"{SERVER}/{DATABASE}"  # the server: $BENCH_POSTGRES, as every bench
REDIS_URL = os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/12")  # flushed before each run
BEAT_QUEUE = "peer"
OUR_QUEUE = "short"
NOOP_TASK = "bench.noop"


# --- environment ------------------------------------------------------------------------

def configure(var_dir: Path, *, keep: bool = False) -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["REDIS_URL"] = REDIS_URL
    os.environ["DJANGO_SETTINGS_MODULE"] = "scheduler_project.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["SCHEDULER_VAR_DIR"] = str(var_dir)
    os.environ["OBJECT_STORE_URL"] = f"file://{var_dir}/objects"
    from _setup import django_on

    django_on(DATABASE, keep=keep)  # creates, migrates and (unless kept) empties the project's tables


def reset(keep: bool) -> None:
    """Empty both systems' tables (unless the database is kept) and the Redis DB, so every run
    starts from nothing."""
    from django.db import connection

    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    if keep:
        return

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE effects_effectdelivery, effects_effectintent, runs_storedobject, runs_outbox, "
            "runs_attempt, runs_run, runs_bucketlease, runs_scannermember, schedules_schedulerevision, schedules_requestkey, schedules_schedule, "
            "schedules_apitoken, schedules_tenant_allowed_job_types, schedules_tenant, "
            "django_celery_beat_periodictask, django_celery_beat_periodictasks, "
            "django_celery_beat_crontabschedule, django_celery_beat_intervalschedule CASCADE"
        )


def retire(tenant) -> None:
    """A kept database after a measurement: the tenant's schedules paused, its runs that were
    never claimed canceled and their hints marked served, as history."""
    from django.db import connection, transaction

    from schedules.models import Schedule

    with transaction.atomic(), connection.cursor() as cursor:
        Schedule.objects.filter(tenant=tenant).update(paused=True, next_run_at=None)
        cursor.execute("UPDATE runs_outbox SET published_at = coalesce(published_at, now()), processed_at = now() "
                       "WHERE processed_at IS NULL AND run_id IN (SELECT id FROM runs_run WHERE tenant_id = %s)",
                       [tenant.id])
        cursor.execute("UPDATE runs_run SET state = 'canceled', pending_reason = '', finished_at = now() "
                       "WHERE tenant_id = %s AND finished_at IS NULL", [tenant.id])


def next_due(lead: float) -> datetime:
    """The first minute boundary at least ``lead`` seconds from now (UTC)."""
    earliest = datetime.now(timezone.utc) + timedelta(seconds=lead)
    due = earliest.replace(second=0, microsecond=0)
    if due < earliest:
        due += timedelta(minutes=1)
    return due


# --- workload set-up ---------------------------------------------------------------------

def create_beat_tasks(n: int, due: datetime) -> None:
    from django_celery_beat.models import CrontabSchedule, PeriodicTask, PeriodicTasks

    crontab = CrontabSchedule.objects.create(
        minute=str(due.minute), hour=str(due.hour), day_of_week="*", day_of_month="*",
        month_of_year="*", timezone="UTC",
    )
    batch = []
    for i in range(n):
        batch.append(PeriodicTask(name=f"peer-{i:06d}", task=NOOP_TASK, crontab=crontab, queue=BEAT_QUEUE,
                                  args="[]", kwargs="{}", headers="{}", enabled=True))
        if len(batch) == 5000:
            PeriodicTask.objects.bulk_create(batch)
            batch = []
    PeriodicTask.objects.bulk_create(batch)
    PeriodicTasks.update_changed()


def create_our_schedules(n: int, due: datetime, directives: float = 0) -> None:
    from schedule_services.lifecycle import schedule_create
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedules.tenants import tenant_create

    # A name of its own per measurement: a kept database holds the earlier ones.
    tenant, _ = tenant_create(name=f"peer-{due:%Y%m%dT%H%M}", max_active_runs=10**7, max_schedules=10**7)
    template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "peer", "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "cron", "cron": f"{due.minute} {due.hour} * * *", "timezone": "UTC"},
        "overlapPolicy": "allow"}))
    template.refresh_from_db()
    assert template.next_run_at == due, (template.next_run_at, due)
    clone_schedule(template, n - 1, due)
    if directives:
        add_directives(tenant, due, directives)
    return tenant


def add_directives(tenant, due: datetime, percent: float) -> None:
    """A note directive on ``due`` for every (100 / percent)-th schedule, written as the
    service writes one (the schedule's directive_seq moved on)."""
    from django.db.models import F
    from schedules.models import AuditAction, AuthorKind, OccurrenceDirective, Schedule

    ids = list(Schedule.objects.filter(tenant=tenant).order_by("id").values_list("id", flat=True))
    step = max(1, round(100 / percent))
    chosen = ids[::step]
    OccurrenceDirective.objects.bulk_create([
        OccurrenceDirective(schedule_id=sid, tenant=tenant, instant=due, action=AuditAction.NOTE, note="bench",
                            created_at=datetime.now(timezone.utc), actor_kind=AuthorKind.API, actor="peer")
        for sid in chosen], batch_size=5000)
    Schedule.objects.filter(id__in=chosen).update(directive_seq=F("directive_seq") + 1)
    print(f"  {len(chosen):,} of {len(ids):,} schedules carry a directive on the due instant", flush=True)


# --- measurement -------------------------------------------------------------------------

class BrokerTap(threading.Thread):
    """Pops every raw message from one Redis list and timestamps its arrival."""

    def __init__(self, key: str):
        super().__init__(daemon=True)
        import redis

        self.key = key
        self.redis = redis.Redis.from_url(REDIS_URL)
        self.arrivals: list[tuple[float, bytes]] = []
        self.counted = self.worth = 0  # messages decoded so far, and the tasks they stand for
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            item = self.redis.brpop([self.key], timeout=0.2)
            if item is None:
                continue
            now = time.time()
            self.arrivals.append((now, item[1]))
            while True:  # drain what is already there without waiting
                more = self.redis.rpop(self.key, 1000)
                if not more:
                    break
                now = time.time()
                self.arrivals.extend((now, raw) for raw in more)

    def count(self, system: str) -> int:
        """Tasks (beat) or runs (ours) the messages so far stand for (decoded once each)."""
        arrived = len(self.arrivals)
        self.worth += sum(message_key(raw, system)[1] for _, raw in self.arrivals[self.counted:arrived])
        self.counted = arrived
        return self.worth


def message_key(raw: bytes, system: str) -> tuple[str, int]:
    """The identity one message stands for and how many tasks it is worth: the PeriodicTask
    name (beat, 1), or the first run id and the claims the hint is worth (ours: a hint
    [run id, resource class, worth] stands for that many queued runs, workers.batching)."""
    message = json.loads(raw)
    headers = message["headers"]
    if system == "beat":
        return headers["periodic_task_name"], 1
    args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    return args[0], (args[2] if len(args) > 2 else 1)


def process_tree(pids: list[int]) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = set(pids), list(pids)
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return tree


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemorySampler(threading.Thread):
    """Peak of the summed RSS of the scheduler processes and their children, every 0.5 s."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids = pids
        self.peak_kib = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            total = sum(rss_kib(pid) for pid in process_tree(self.pids))
            self.peak_kib = max(self.peak_kib, total)
            self.stop.wait(0.5)


def start_processes(system: str, copies: int, env: dict, log_dir: Path) -> list[subprocess.Popen]:
    py = sys.executable
    commands = {}
    for i in range(copies):
        if system == "beat":
            commands[f"beat{i}"] = [py, "-m", "celery", "-A", "scheduler_project", "beat", "-S",
                                    "django_celery_beat.schedulers:DatabaseScheduler", "-l", "warning",
                                    "--pidfile", str(log_dir / f"beat{i}.pid")]
        else:
            commands[f"scan{i}"] = [py, "manage.py", "scan"]
            commands[f"relay{i}"] = [py, "manage.py", "relay"]
    procs = []
    for name, cmd in commands.items():
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log_dir / f"{name}.log", "w"),
                                      stderr=subprocess.STDOUT))
        procs[-1].name = name
    return procs


def cpu_sample(procs: list[subprocess.Popen]) -> dict[str, float]:
    """CPU seconds so far of each scheduler process tree (named by its log)."""
    return {p.name: tree_cpu_seconds(p.pid) for p in procs}


def server_writes() -> dict[str, int]:
    """What the server has written and read so far: WAL bytes and full-page images (the whole
    server's), and the pages of the runs table read from outside shared_buffers (this
    database's). A new run's row landing on a page of history reads that page and, as the
    page's first change since the checkpoint, writes all of it to the WAL."""
    import psycopg

    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        (wal, images), = conn.execute("SELECT pg_current_wal_lsn() - '0/0', wal_fpi FROM pg_stat_wal")
        row = conn.execute("SELECT heap_blks_read FROM pg_statio_user_tables WHERE relname = 'runs_run'").fetchone()
    return {"wal_bytes": int(wal), "page_images": int(images), "run_pages_read": int(row[0]) if row else 0}


def stop_processes(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def measure(system: str, n: int, copies: int, args, var_dir: Path) -> dict:
    from django.db import connection

    run_started = time.monotonic()
    reset(args.keep)
    lead = args.lead if args.lead is not None else 35 + n * 0.0015
    due = next_due(lead)
    tenant = None
    if system == "beat":
        create_beat_tasks(n, due)
    else:
        tenant = create_our_schedules(n, due, args.directives)
    setup_seconds = time.monotonic() - run_started
    connection.close()

    expected_messages = n * copies if system == "beat" else n
    log_dir = var_dir / f"{system}-{n}-{copies}"
    log_dir.mkdir(parents=True, exist_ok=True)
    tap = BrokerTap(BEAT_QUEUE if system == "beat" else OUR_QUEUE)
    tap.start()
    env = dict(os.environ)
    procs = start_processes(system, copies, env, log_dir)
    sampler = MemorySampler([p.pid for p in procs])
    sampler.start()
    started_before_due = due.timestamp() - time.time()
    print(f"  [{system} x{copies} N={n:,}] set-up {setup_seconds:.1f}s; processes started "
          f"{started_before_due:.1f}s before due {due:%H:%M:%S}Z", flush=True)

    cap = due.timestamp() + args.cap
    reached_at = cpu_before = cpu_after = None
    writes_before = server_writes()
    backends, sampled_at = BackendsCpu(DATABASE), 0.0
    try:
        while time.time() < cap:
            if cpu_before is None and time.time() >= due.timestamp() - 1:
                cpu_before = cpu_sample(procs)
            if cpu_before is not None and time.time() - sampled_at >= 0.5:
                backends.sample()
                sampled_at = time.time()
            if any(p.poll() is not None for p in procs):
                raise SystemExit(f"a scheduler process exited early; see {log_dir}")
            if reached_at is None and tap.count(system) >= expected_messages:
                reached_at = time.time()
            # After the target, linger briefly to catch duplicates still on their way.
            if reached_at is not None and time.time() - reached_at >= args.grace:
                break
            time.sleep(0.1)
        cpu_after = cpu_sample(procs)
        backends.sample()
        cpu_after["postgres"] = backends.total()
        time.sleep(1)  # a backend reports its statistics at most once a second
        writes = {k: v - writes_before[k] for k, v in server_writes().items()}
    finally:
        stop_processes(procs)
        time.sleep(0.3)
        tap.stop.set()
        sampler.stop.set()
        tap.join()
        sampler.join()

    due_ts = due.timestamp()
    firsts: dict[str, float] = {}
    per_key: Counter = Counter()
    worth: dict[str, int] = {}
    for arrived, raw in tap.arrivals:
        key, worth[key] = message_key(raw, system)
        per_key[key] += 1
        firsts.setdefault(key, arrived)
    # Every task (run) a message stands for arrived with it; tasks never published by the cap
    # count as infinitely late, so percentiles are over all N.
    lateness = sorted(t - due_ts for key, t in firsts.items() for _ in range(worth[key]))
    lateness += [float("inf")] * (n - len(lateness))
    result = {
        "system": f"{'celery beat' if system == 'beat' else 'scan + relay'}" + (f" x{copies}" if copies > 1 else ""),
        "kind": system, "n": n, "copies": copies, "published": sum(worth.values()), "messages": len(tap.arrivals),
        "first": lateness[0] if lateness else float("nan"),
        "p50": percentile(lateness, 50), "p99": percentile(lateness, 99),
        "last": lateness[-1] if lateness else float("nan"),
        "peak_rss_mb": sampler.peak_kib / 1024, "per_key": Counter(per_key.values()),
        "wall_seconds": time.monotonic() - run_started, "setup_seconds": setup_seconds,
        "lead_seconds": started_before_due,
        # CPU seconds from 1 s before the instant to the last arrival (+ grace): per process
        # tree (scan0, relay0, beat0) and the PostgreSQL backends of the bench's database,
        # sampled every 0.5 s (processes reconnect).
        "cpu": {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after} if cpu_before and cpu_after else {},
        # From the processes' start to the end, set-up excluded.
        "writes": writes,
    }
    if system == "ours":
        from django.db.models import Count

        from runs.models import Run

        runs = Run.objects.filter(trigger="schedule", tenant=tenant)
        per_instant = runs.values("schedule_id", "scheduled_at").annotate(c=Count("id"))
        result["occurrences"] = runs.count()
        result["instants"] = per_instant.count()
        result["max_per_instant"] = max((row["c"] for row in per_instant), default=0)
        # Where our time goes: due -> occurrence row committed (scanner), then row -> hint (relay).
        created = sorted((c - due).total_seconds() for c in runs.values_list("created_at", flat=True))
        result["materialized_p50"] = percentile(created, 50)
        result["materialized_last"] = created[-1] if created else float("nan")
        if args.keep:
            retire(tenant)
        connection.close()
    return result


# --- report ------------------------------------------------------------------------------

def fmt_s(value: float, cap: float) -> str:
    if value != value:
        return "-"
    return f">{cap:.0f}s" if value == float("inf") else f"{value:.2f}s"


def fmt_ratio(beat: float, ours: float, cap: float) -> str:
    if beat == float("inf"):
        return f">{cap / ours:.0f}x"
    return f"{beat / ours:.1f}x"


def row(r: dict, cap: float, runs: int = 1) -> str:
    published = f"{r['published']:,.0f}/{r['n']:,}"
    return (f"{r['n']:>7,} | {r['system']:<17} | {published:>15} | {fmt_s(r['first'], cap):>8} | "
            f"{fmt_s(r['p50'], cap):>8} | {fmt_s(r['p99'], cap):>8} | {fmt_s(r['last'], cap):>8} | "
            f"{r['peak_rss_mb']:>11.0f} | {runs:>4}")


HEADER = (f"{'N':>7} | {'system':<17} | {'published':>15} | {'first':>8} | {'p50':>8} | {'p99':>8} | "
          f"{'last':>8} | {'peak RSS MB':>11} | {'runs':>4}")


def summarize(results: list[dict]) -> list[dict]:
    """One row per (N, system, copies): the median of every figure over the repeats."""
    rows = []
    for key in dict.fromkeys((r["n"], r["kind"], r["copies"]) for r in results):
        group = [r for r in results if (r["n"], r["kind"], r["copies"]) == key]
        merged = dict(group[0], runs=len(group))
        for field in ("published", "messages", "first", "p50", "p99", "last", "peak_rss_mb", "wall_seconds"):
            merged[field] = median([r[field] for r in group])
        rows.append(merged)
    return rows


def print_table(results: list[dict], cap: float) -> None:
    rows = summarize(results)
    print()
    print(HEADER)
    print("-" * len(HEADER))
    for r in rows:
        print(row(r, cap, r["runs"]))
    print(f"(medians over 'runs' repeats; lateness = first arrival at Redis - due instant, per task; "
          f"a task not published by due + {cap:.0f}s counts as later than that)")
    print()
    for b in rows:
        if b["kind"] != "beat":
            continue
        for o in rows:
            if o["kind"] == "ours" and (o["n"], o["copies"]) == (b["n"], b["copies"]):
                note = ("" if b["published"] == b["n"]
                        else f"  (beat published {b['published']:,.0f}/{b['n']:,} by the cap)")
                print(f"N={b['n']:,}{' x' + str(b['copies']) if b['copies'] > 1 else ''}: beat/ours  "
                      f"p50 {fmt_ratio(b['p50'], o['p50'], cap)}  p99 {fmt_ratio(b['p99'], o['p99'], cap)}  "
                      f"last {fmt_ratio(b['last'], o['last'], cap)}  "
                      f"memory {b['peak_rss_mb'] / o['peak_rss_mb']:.2f}x{note}")
    print()
    for r in results:
        print(f"N={r['n']:,} {r['system']}: {r['messages']:,} messages, {r['published']:,} distinct; "
              f"messages per {'task' if r['kind'] == 'beat' else 'run'}: "
              + ", ".join(f"{k}x: {v:,}" for k, v in sorted(r["per_key"].items()))
              + (f"; occurrences {r['occurrences']:,} over {r['instants']:,} (schedule, instant) pairs, "
                 f"max {r['max_per_instant']} per pair; materialized (due -> row) p50 "
                 f"{r['materialized_p50']:.2f}s last {r['materialized_last']:.2f}s" if r["kind"] == "ours" else "")
              + f"; wall {r['wall_seconds']:.0f}s (set-up {r['setup_seconds']:.0f}s, "
                f"processes up {r['lead_seconds']:.0f}s before due)"
              + ("; CPU s per 1,000 runs: " + ", ".join(f"{k} {v * 1000 / r['n']:.3f}" for k, v in r["cpu"].items())
                 if r.get("cpu") else "")
              + f"; per {'task' if r['kind'] == 'beat' else 'run'}: {writes_text(r['writes'], r['n'])}")


def writes_text(writes: dict[str, int], n: int) -> str:
    """server_writes() differences per message or run of ``n``."""
    return (f"WAL {writes['wal_bytes'] / n / 1024:.1f} KB, {writes['page_images'] / n:.2f} full-page images,"
            f" {writes['run_pages_read'] / n:.2f} pages of runs_run read")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--mode", choices=["both", "beat", "ours"], default="both")
    parser.add_argument("--duplicates", action="store_true",
                        help="run two of each scheduler process (two beats; two scanners + two relays)")
    parser.add_argument("--cap", type=float, default=240.0, help="stop this many seconds after the due instant")
    parser.add_argument("--lead", type=float, default=None,
                        help="minimum seconds from set-up start to the due minute (default 35 + 1.5 ms per schedule)")
    parser.add_argument("--grace", type=float, default=3.0,
                        help="seconds to keep listening after the expected messages arrived (catches duplicates)")
    parser.add_argument("--repeat", type=int, default=1, help="measurements per N and system (medians reported)")
    parser.add_argument("--keep", action="store_true",
                        help="--mode ours only: use $PEER_DATABASE as it is (a loaded history), not emptied")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    parser.add_argument("--directives", type=float, default=0,
                        help="percent of our schedules with a note directive on the due instant (e.g. 10)")
    args = parser.parse_args()
    if args.keep and args.mode != "ours":
        parser.error("--keep measures our system alone (--mode ours): beat's tables would be emptied")

    var_dir = Path(tempfile.mkdtemp(prefix="peer-beat-"))
    configure(var_dir, keep=args.keep)
    systems = ["beat", "ours"] if args.mode == "both" else [args.mode]
    copies = 2 if args.duplicates else 1
    print(f"peer benchmark: N={args.n} systems={systems} copies={copies} "
          f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} "
          f"RELAY_REPUBLISH_AFTER_SECONDS={os.environ.get('RELAY_REPUBLISH_AFTER_SECONDS', '30 (default)')}",
          flush=True)
    results = []
    for n in args.n:
        for i in range(args.repeat):
            for system in systems:
                result = measure(system, n, copies, args, var_dir)
                print("  " + row(result, args.cap), flush=True)
                results.append(result)
    print_table(results, args.cap)
    if args.json:
        args.json.write_text(json.dumps([{k: v for k, v in r.items() if k != "per_key"} for r in results]))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
