"""Shared set-up for benchmarks: a dedicated PostgreSQL database, migrated, emptied."""

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Processes a benchmark starts (scanner, relay, workers, gunicorn) refuse to start without a
# signing key; a benchmark's links live as long as it does, so a fresh one each run.
os.environ.setdefault("SECRET_KEY", "bench-" + secrets.token_urlsafe(32))
# The PostgreSQL server benchmarks use: the shared one, unless pointed at a private cluster
# (one with pg_stat_statements preloaded, say) by BENCH_POSTGRES.
SERVER = os.environ.get("BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


_prepared: set[str] = set()


def django_on(database: str, *, keep: bool = False):
    """Point Django at ``database``: recreated and migrated on the first call of this process
    (so its schema is always the current one), emptied on every later call. With ``keep``,
    what the database holds stays (a history loaded by bench/history.py): created when
    missing, migrated, never emptied."""
    os.environ.setdefault("DATABASE_URL", f"{SERVER}/{database}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if database not in _prepared:
        import psycopg

        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
            if not keep:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            if not (keep and exists):
                conn.execute(f'CREATE DATABASE "{database}"')
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        _prepared.add(database)
    if keep:
        return
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE effects_effectdelivery, effects_effectintent, runs_storedobject, runs_outbox, "
            "runs_attempt, runs_run, schedules_schedulerevision, schedules_requestkey, schedules_schedule, "
            "schedules_apitoken, schedules_tenant_allowed_job_types, schedules_tenant CASCADE"
        )


def clone_schedule(template, copies: int, next_run_at) -> None:
    """``copies`` more schedules like ``template`` (same rule, params, revision payload), all
    due at ``next_run_at`` with the template itself: a wave built in seconds, not via the API."""
    from kernel.progress import progress
    from schedules.models import Schedule, ScheduleRevision

    payload = ScheduleRevision.objects.get(schedule=template, revision=template.revision).payload
    with progress("schedules cloned", total=copies) as advance:
        for start in range(0, copies, 5000):
            _clone_batch(template, payload, min(5000, copies - start), next_run_at)
            advance(min(5000, copies - start))
    Schedule.objects.filter(id=template.id).update(next_run_at=next_run_at)


def _clone_batch(template, payload, count: int, next_run_at) -> None:
    from schedules.models import Schedule, ScheduleRevision
    from schedule_services.lifecycle import due_bucket

    schedules = []
    for _ in range(count):
        schedule = Schedule(
            tenant_id=template.tenant_id, job_type_id=template.job_type_id, name=template.name,
            recurrence=template.recurrence, params=template.params,
            overlap_policy=template.overlap_policy, next_run_at=next_run_at,
        )
        schedule.bucket = due_bucket(schedule.id)
        schedules.append(schedule)
    Schedule.objects.bulk_create(schedules)
    ScheduleRevision.objects.bulk_create([ScheduleRevision(schedule=s, revision=1, payload=payload) for s in schedules])


def wave(n: int, due, *, name: str = "wave"):
    """A tenant with ``n`` zero-second demo.sleep schedules due at ``due`` (overlap allowed,
    no run or active-run limit in the way); returns the tenant."""
    import time

    from scheduler_project.http.schedule_requests import schedule_spec
    from schedule_services.lifecycle import schedule_create
    from schedules.tenants import tenant_create

    tenant, _ = tenant_create(name=f"{name}-{time.time_ns()}", max_active_runs=10**6, max_schedules=10**7)
    template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": name, "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}, "overlapPolicy": "allow"}))
    clone_schedule(template, n - 1, due)
    return tenant


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O) since boot."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a live process and all its live descendants."""
    parents, cpu = _processes()

    def descends(pid):
        while pid > 1:
            if pid == root_pid:
                return True
            pid = parents.get(pid, 0)
        return False

    return sum(seconds for pid, seconds in cpu.items() if descends(pid))


def cpu_by_command() -> dict[str, float]:
    """User + system CPU seconds of every live process, kernel threads included, summed by
    what it is: its command name, and for a PostgreSQL process its role and database from
    its title ("postgres: walwriter", "postgres: backend scheduler_burst")."""
    totals: dict[str, float] = {}
    for pid, seconds in _processes()[1].items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if title.startswith("postgres: "):
            words = title.split(": ", 2)[-1].split()  # "walwriter" or "user database host state"
            name = "postgres: " + (f"backend {words[1]}" if len(words) > 2 and "(" in title else " ".join(words[:2]))
        elif title:
            name = " ".join(Path(word).name for word in title.split()[:3])
        totals[name] = totals.get(name, 0.0) + seconds
    return totals


class BackendsCpu:
    """CPU seconds of ``database``'s PostgreSQL backends over a window, sampled now and then
    (``sample()``): a backend that ends or starts within the window (a process reconnecting)
    counts for the part of its life that was seen."""

    def __init__(self, database: str, exclude: frozenset[int] = frozenset()):
        self.database, self.exclude = database, exclude  # exclude: backends not to count (the caller's own)
        self.seen: dict[int, list[float]] = {}  # pid -> [CPU at the window's start (0 if later), last]
        self.started = False

    def sample(self) -> None:
        import psycopg

        # A connection of its own: the caller's may be one of those being measured.
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            pids = [row[0] for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [self.database])]
        for pid in set(pids) - self.exclude:
            seconds = _cpu_seconds(pid)
            if seconds is not None:
                self.seen.setdefault(pid, [seconds if not self.started else 0.0, seconds])[1] = seconds
        self.started = True

    def total(self) -> float:
        return sum(last - first for first, last in self.seen.values())


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _processes() -> tuple[dict[int, int], dict[int, float]]:
    """Every live process's parent and its user + system CPU seconds."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(stat[1])
        cpu[int(entry)] = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return parents, cpu
