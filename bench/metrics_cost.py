"""Cost of a /metrics scrape at 50,000 schedules: the scrape runs the capacity
forecast of the next CAPACITY_GAUGE_HORIZON_SECONDS for `scheduler_required_slots`.

    .venv/bin/python bench/metrics_cost.py [--schedules 50000] [--history 7] [--repeat 9]
        [--database scheduler_metrics_bench]

Seeds one tenant's schedules cloned from one made through the services, in three shapes:
60 % share one daily rule whose instant falls 10 minutes after the seeding ends (the wave
inside the horizon), 20 % hourly 3 minutes before it with `jitterSeconds` 600 (each its own
source), 20 % daily at one of 1,440 distinct minutes; each with its true next instant. With `--history N`, each schedule gets N accepted runs in
the statistics window straight in SQL (one a day back from now, 1 to 9 s long), so the
forecast uses per-schedule durations. 10,000 live `short` slots.

Then it scrapes /metrics through Django's test client in process `--repeat` times: the
first scrape of a process separately (nothing cached), then the median wall ms, process
CPU ms and SQL statements per scrape. With the gauge's cache on (CAPACITY_GAUGE_CACHE_SECONDS
> 0) every scrape but the first inside the interval reuses the figures; the script also
prints the cost with the cache off (0), the API's forecast of the same horizon, and where a
computation of the figures goes (median wall ms of each part).
"""

import argparse
import os
import time
from datetime import timedelta

from _setup import clone_schedule, django_on, median

CHUNK = 5000

HISTORY_SQL = """
WITH chosen AS (
    SELECT id, tenant_id, job_type_id, row_number() OVER (ORDER BY id) AS idx FROM schedules_schedule
), picked AS (SELECT * FROM chosen WHERE idx > %(first)s AND idx <= %(last)s),
series AS (
    SELECT p.id AS schedule_id, p.tenant_id, p.job_type_id, (p.idx * %(per)s + g) AS n, p.idx,
           date_trunc('minute', now()) - g * interval '1 day' AS sched
    FROM picked p, generate_series(1, %(per)s) AS g
)
INSERT INTO runs_run (id, schedule_id, tenant_id, trigger, revision, payload, job_type, resource_class, state,
    pending_reason, scheduled_at, due_at, fence, attempt_count, dispatch_count, max_attempts, current_attempt_id,
    holds_guard, cancellation_requested, cancellation_accepted, started_at, finished_at, error,
    accepted_attempt_id, result_checksum, result_size, result_content_type, progress_message, created_at)
SELECT 'run_h' || lpad(n::text, 12, '0'), schedule_id, tenant_id, 'schedule', 1, '{"seconds": 0}', job_type_id,
    'short', 'succeeded', '', sched, sched, 1, 1, 1, 3, 'att_h' || lpad(n::text, 12, '0'), false, false, false,
    sched + interval '1 second', sched + (2 + idx %% 9) * interval '1 second', '',
    'att_h' || lpad(n::text, 12, '0'), 'sha256:' || md5(n::text), 100, 'text/plain', '', sched
FROM series
"""

ATTEMPTS_SQL = """
INSERT INTO runs_attempt (id, run_id, number, fence, worker_label, state, lease_seconds, started_at,
    lease_expires_at, finished_at, error)
SELECT accepted_attempt_id, id, 1, 1, 'bench', 'succeeded', 60, started_at, started_at + interval '60 seconds',
    finished_at, ''
FROM runs_run WHERE id >= %(low)s AND id <= %(high)s
"""


def seed(schedules: int, history: int):
    from django.db import connection

    from runs.capacity.live import slots_report
    from kernel.clock import authority_now
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedule_services.lifecycle import schedule_create
    from schedules.tenants import tenant_create

    tenant, _ = tenant_create(name="metrics", max_schedules=10**7, max_active_runs=10**6)
    template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "metrics", "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    clone_schedule(template, schedules - 1, authority_now() - timedelta(seconds=1))
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM schedules_schedule ORDER BY id")
        ids = [row[0] for row in cursor.fetchall()]
    seed_history(schedules, history)
    wave_at = shape_rules(ids)
    with connection.cursor() as cursor:
        for table in ("runs_run", "runs_attempt", "schedules_schedule"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*) FROM runs_run")
        runs = cursor.fetchone()[0]
    slots_report("bench:metrics", {"short": 10_000}, ttl_seconds=7200)
    print(f"seeded {schedules} schedules ({len(ids) * 6 // 10} in a wave at {wave_at:%H:%M} UTC), "
          f"{runs} runs of history")


def seed_history(schedules: int, history: int) -> None:
    from django.db import connection, transaction

    for first in range(0, schedules if history else 0, CHUNK):
        last = min(schedules, first + CHUNK)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(HISTORY_SQL, {"first": first, "last": last, "per": history})
            cursor.execute(ATTEMPTS_SQL, {"low": f"run_h{(first + 1) * history + 1:012d}",
                                          "high": f"run_h{last * history + history:012d}"})


def shape_rules(ids: list[str]):
    """60 % one daily wave 10 minutes from now, 20 % hourly with jitter 3 minutes before it,
    20 % daily at 1,440 distinct minutes; each with its true next instant (as the scanner
    leaves it). Returns the wave's instant."""
    from django.db import connection, transaction

    from kernel.clock import authority_now
    from schedules.models import Schedule

    wave_at = (authority_now() + timedelta(minutes=10)).replace(second=0, microsecond=0)
    hour_at = wave_at - timedelta(minutes=3)
    wave, hourly, spread = ids[: len(ids) * 6 // 10], ids[len(ids) * 6 // 10: len(ids) * 8 // 10], ids[len(ids) * 8 // 10:]
    Schedule.objects.filter(id__in=wave).update(
        recurrence={"kind": "cron", "cron": f"{wave_at.minute} {wave_at.hour} * * *", "timezone": "UTC"},
        next_run_at=wave_at)
    Schedule.objects.filter(id__in=hourly).update(
        recurrence={"kind": "cron", "cron": f"{hour_at.minute} * * * *", "timezone": "UTC"}, jitter_seconds=600,
        next_run_at=hour_at)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "WITH h AS (SELECT id, n %% 60 AS m, n / 60 %% 24 AS hr, date_trunc('day', now()) "
            "    + (n / 60 %% 24) * interval '1 hour' + (n %% 60) * interval '1 minute' AS today "
            "  FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM unnest(%s::text[]) AS id) numbered) "
            "UPDATE schedules_schedule SET recurrence = jsonb_build_object('kind', 'cron', 'timezone', 'UTC', "
            "  'cron', h.m::text || ' ' || h.hr::text || ' * * *'), "
            "  next_run_at = CASE WHEN h.today > now() THEN h.today ELSE h.today + interval '1 day' END "
            "FROM h WHERE schedules_schedule.id = h.id", [spread])
    return wave_at


def scrape(client, repeat: int) -> list[tuple[float, float, int]]:
    """(wall ms, process CPU ms, statements) of each of `repeat` scrapes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    figures = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/metrics")
        figures.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, len(queries)))
        assert response.status_code == 200 and b"scheduler_required_slots" in response.content
    return figures


def report(label: str, figures) -> None:
    wall, cpu, statements = zip(*figures)
    print(f"{label:44} {median(wall):9.1f} ms  cpu {median(cpu):9.1f} ms  {median(statements):5.0f} statements"
          f"  (min {min(wall):.1f}, max {max(wall):.1f}; {len(figures)} scrapes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=50_000)
    parser.add_argument("--history", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE", "scheduler_metrics_bench"))
    args = parser.parse_args()
    django_on(args.database)
    from django.conf import settings
    from django.test import Client

    from runs.capacity import gauges
    from runs.capacity.forecast import forecast

    started = time.perf_counter()
    seed(args.schedules, args.history)
    print(f"seeding took {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")
    settings.DEBUG = False
    client = Client()
    cache_seconds = getattr(settings, "CAPACITY_GAUGE_CACHE_SECONDS", 0)
    forget = getattr(gauges, "forget_cached_figures", lambda: None)
    for label, seconds in ((f"cache {cache_seconds} s", cache_seconds), ("cache off", 0)):
        if label == "cache off" and not cache_seconds:
            break
        settings.CAPACITY_GAUGE_CACHE_SECONDS = seconds
        forget()
        report(f"/metrics, {label}: first scrape", scrape(client, 1))
        report(f"/metrics, {label}: every scrape", scrape(client, args.repeat))
    horizon = timedelta(seconds=settings.CAPACITY_GAUGE_HORIZON_SECONDS)
    timed("forecast() of the horizon (the API's, with rows)", lambda now: forecast(now, now + horizon), args.repeat)
    breakdown(horizon, args.repeat)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def timed(label: str, call, repeat: int):
    """Median wall ms of `call(now)`; returns its last result."""
    from kernel.clock import authority_now

    times = []
    for _ in range(repeat):
        now = authority_now()
        wall = time.perf_counter()
        result = call(now)
        times.append((time.perf_counter() - wall) * 1000)
    print(f"{label:44} {median(times):9.1f} ms")
    return result


def breakdown(horizon, repeat: int) -> None:
    """Where a computation of the gauges' figures goes (absent from a build without them)."""
    try:
        from runs.capacity.forecast import _required, range_work
        from runs.capacity.statistics import schedule_durations
    except ImportError:
        return
    from runs.capacity.statistics import runtime_statistics
    from schedules.models import JobType, Schedule

    names = list(JobType.objects.filter(enabled=True).values_list("name", flat=True))
    timed(f"  job types' statistics ({len(names)} types)", lambda now: runtime_statistics(names, now=now), repeat)
    work = timed("  demand and work of the horizon", lambda now: range_work(now, now + horizon, None), repeat)
    def due(now):
        return Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__lt=now + horizon)

    count = timed("  of which: schedules due in it", lambda now: due(now).count(), repeat)
    timed(f"  of which: their own durations ({count})", lambda now: schedule_durations(due(now).values("id"), now=now),
          repeat)
    timed("  required slots (simulations)", lambda now: {rc: _required(part, 10.0) for rc, part in work.items()},
          repeat)


if __name__ == "__main__":
    main()
