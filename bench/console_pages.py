"""Console pages' server time with 10,000 schedules and 1 M runs (target: every page under
300 ms, median and p95).

    .venv/bin/python bench/console_pages.py [--runs 1000000] [--schedules 10000] [--repeat 21]
        [--database scheduler_console_bench]

Seeds two tenants (90 % and 10 % of the schedules; the small one's in America/New_York) with
hourly schedules cloned from one made through the services each, and their history straight
in SQL (INSERT ... SELECT generate_series, one transaction per 100 schedules): one run an hour
per schedule back from now, each with its accepted attempt, one in 10,007 failed (so some
schedules are failing now), one in 500 with an expired attempt before it. Then, so that the
Overview has something to say: 200 runs queued and 10 minutes late, and 1,000 uncertain
email effects. Times each console page through Django's test client, in process (server
time: middleware, view, queries, template), after one warm-up call, and prints the median and
p95 of `--repeat` calls per page, after measuring the statistics snapshot forecasts read (what
the cleanup loop does every CAPACITY_STATS_REFRESH_SECONDS; its time is printed). Last, it
drops run_finished_state_idx and times the failed-runs page again, then deletes the snapshot
and times Next 24 hours again: the figures without the index and without the snapshot.
"""

import argparse
import os
import time
from datetime import datetime, timezone
from urllib.parse import urlencode

from _setup import clone_schedule, django_on, median, percentile

SCHEDULES = 10_000
BIG_SHARE = 0.9
CHUNK_SCHEDULES = 100
TARGET_MS = 300
LATE_RUNS = 200
UNCERTAIN_EFFECTS = 1000

RUNS_SQL = """
WITH numbered AS (
    SELECT id, tenant_id, row_number() OVER (ORDER BY id) AS idx FROM schedules_schedule WHERE tenant_id = %(tenant)s
), chosen AS (SELECT * FROM numbered WHERE idx > %(first)s AND idx <= %(last)s),
series AS (
    SELECT c.id AS schedule_id, c.tenant_id, (%(offset)s + c.idx * %(per)s + g) AS n,
           date_trunc('hour', now()) - (%(per)s - g) * interval '1 hour' AS sched
    FROM chosen c, generate_series(1, %(per)s) AS g
)
INSERT INTO runs_run (id, schedule_id, tenant_id, trigger, revision, payload, job_type, resource_class, state,
    pending_reason, scheduled_at, due_at, fence, attempt_count, dispatch_count, max_attempts, current_attempt_id,
    holds_guard, cancellation_requested, cancellation_accepted, started_at, finished_at, error,
    accepted_attempt_id, result_checksum, result_size, result_content_type, progress_message, created_at)
SELECT 'run_b' || lpad(n::text, 12, '0'), schedule_id, tenant_id, 'schedule', 1, '{"seconds": 0}', 'demo.sleep',
    'short', CASE WHEN n %% 10007 = 0 THEN 'failed' ELSE 'succeeded' END, '', sched, sched,
    CASE WHEN n %% 500 = 0 THEN 2 ELSE 1 END, CASE WHEN n %% 500 = 0 THEN 2 ELSE 1 END, 1, 3,
    'att_b' || lpad(n::text, 12, '0'), false, false, false,
    sched + (n %% 7) * interval '1 second', sched + (n %% 7 + 2) * interval '1 second',
    CASE WHEN n %% 10007 = 0 THEN 'boom' ELSE '' END,
    CASE WHEN n %% 10007 = 0 THEN NULL ELSE 'att_b' || lpad(n::text, 12, '0') END,
    CASE WHEN n %% 10007 = 0 THEN NULL ELSE 'sha256:' || md5(n::text) END, 100, 'text/csv', '', sched
FROM series
"""

ATTEMPTS_SQL = """
INSERT INTO runs_attempt (id, run_id, number, fence, worker_label, state, lease_seconds, started_at,
    lease_expires_at, finished_at, error)
SELECT 'att_b' || substr(id, 6), id, attempt_count, fence, 'bench', CASE WHEN state = 'failed' THEN 'failed'
    ELSE 'succeeded' END, 60, started_at, started_at + interval '60 seconds', finished_at, error
FROM runs_run WHERE id >= %(low)s AND id <= %(high)s
UNION ALL
SELECT 'att_x' || substr(id, 6), id, 1, 1, 'bench', 'expired', 60, started_at - interval '90 seconds',
    started_at - interval '30 seconds', started_at - interval '29 seconds', 'lease expired'
FROM runs_run WHERE id >= %(low)s AND id <= %(high)s AND attempt_count = 2
"""


LATE_SQL = """
INSERT INTO runs_run (id, schedule_id, tenant_id, trigger, revision, payload, job_type, resource_class, state,
    pending_reason, scheduled_at, due_at, fence, attempt_count, dispatch_count, max_attempts, holds_guard, strict,
    backfilled, cancellation_requested, cancellation_accepted, error, progress_message, created_at)
SELECT 'run_late' || lpad(row_number() OVER (ORDER BY id)::text, 8, '0'), id, tenant_id, 'schedule', 1,
    '{"seconds": 0}', 'demo.sleep', 'short', 'queued', '', now() - interval '10 minutes',
    now() - interval '10 minutes', 0, 0, 1, 3, false, false, false, false, false, '', '', now() - interval '10 minutes'
FROM schedules_schedule ORDER BY id LIMIT %(count)s
"""

UNCERTAIN_SQL = """
INSERT INTO effects_effectintent (id, action, run_id, kind, target, result_key, result_checksum, state,
    external_id, delivery_count, resolution, reason, created_at, updated_at)
SELECT 'eff_b' || substr(id, 6), 'send-' || id, id, 'email', '{"to": ["ops@example.com"]}', 'results/' || id,
    result_checksum, 'uncertain', '', 1, '', '', finished_at, finished_at
FROM runs_run WHERE state = 'succeeded' ORDER BY scheduled_at DESC, id DESC LIMIT %(count)s
"""


def seed(total_runs: int, schedules: int) -> dict:
    from django.db import connection, transaction

    from runs.capacity.live import slots_report
    from scheduler_project.http.schedule_requests import schedule_spec
    from kernel.progress import progress
    from schedule_services.lifecycle import schedule_create
    from schedules.tenants import tenant_create

    per = max(1, total_runs // schedules)
    tenants = {}
    offset = 0
    with progress("runs seeded", total=per * schedules) as advance:
        for name, share, zone in (("big", BIG_SHARE, "UTC"), ("small", 1 - BIG_SHARE, "America/New_York")):
            count = round(schedules * share)
            tenant, _ = tenant_create(name=name, max_schedules=10**6, max_active_runs=10**6)
            template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
                "name": f"{name}-hourly", "jobType": "demo.sleep", "params": {"seconds": 0},
                "recurrence": {"kind": "cron", "cron": "0 * * * *", "timezone": zone}}))
            clone_schedule(template, count - 1, template.next_run_at)
            for first in range(0, count, CHUNK_SCHEDULES):
                last = min(count, first + CHUNK_SCHEDULES)
                params = {"tenant": tenant.id, "first": first, "last": last, "per": per, "offset": offset}
                low = f"run_b{offset + (first + 1) * per + 1:012d}"
                high = f"run_b{offset + last * per + per:012d}"
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(RUNS_SQL, params)
                    cursor.execute(ATTEMPTS_SQL, {"low": low, "high": high})
                advance((last - first) * per)
            offset += (count + 1) * per
            tenants[name] = tenant
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(LATE_SQL, {"count": LATE_RUNS})
        cursor.execute(UNCERTAIN_SQL, {"count": UNCERTAIN_EFFECTS})
    with connection.cursor() as cursor:
        for table in ("runs_run", "runs_attempt", "schedules_schedule", "effects_effectintent"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*), count(*) FILTER (WHERE state = 'failed') FROM runs_run")
        runs, failed = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM schedules_schedule")
        made = cursor.fetchone()[0]
    slots_report("bench:console", {"short": 200}, ttl_seconds=3600)
    print(f"seeded {runs} runs ({failed} failed, {LATE_RUNS} queued late) for {made} schedules; "
          f"{UNCERTAIN_EFFECTS} uncertain effects")
    return tenants


def pages(tenants) -> dict[str, str]:
    from runs.models import Run

    big = tenants["big"]
    failed = Run.objects.filter(tenant=big, state="failed").order_by("-scheduled_at", "-id")
    older = failed[49] if failed.count() > 50 else failed.last()
    run = Run.objects.filter(tenant=big, state="succeeded").order_by("-scheduled_at").first()
    before = urlencode({"before": f"{older.scheduled_at.isoformat()}~{older.id}"})
    return {
        "overview": "/console/",
        "next 24 hours": "/console/next-24-hours/",
        "schedules": "/console/schedules/",
        "schedules ?q=small": "/console/schedules/?q=small",
        "schedule page (failed last)": f"/console/schedules/{failed.first().schedule_id}/",
        "schedule page, New York": f"/console/schedules/{Run.objects.filter(tenant=tenants['small']).first().schedule_id}/",
        "runs (big tenant)": f"/console/runs/?tenant={big.id}",
        "runs ?state=failed": f"/console/runs/?tenant={big.id}&state=failed",
        "runs ?state=failed, page 2": f"/console/runs/?tenant={big.id}&state=failed&{before}",
        "runs ?state=queued": f"/console/runs/?tenant={big.id}&state=queued",
        "run page": f"/console/runs/{run.id}/",
        "uncertain effects": "/console/effects/",
    }


def timed(client, url: str, repeat: int) -> tuple[float, float]:
    """(median, p95) in ms of `repeat` calls, after one warm-up call."""
    assert client.get(url).status_code == 200, url
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return median(times), percentile(times, 95)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=SCHEDULES)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE", "scheduler_console_bench"))
    args = parser.parse_args()
    django_on(args.database)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from runs.capacity.statistics import refresh_snapshot
    from runs.models import StatisticsSnapshot

    started = time.perf_counter()
    tenants = seed(args.runs, args.schedules)
    print(f"seeding took {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    refresh_snapshot()  # what the cleanup loop does every CAPACITY_STATS_REFRESH_SECONDS
    print(f"the statistics snapshot (cleanup's pass) took {(time.perf_counter() - started) * 1000:.0f} ms")
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password="x", is_staff=True))
    urls = pages(tenants)
    print(f"{'page':32} {'median':>8} {'p95':>8}  ms ({args.repeat} calls, at {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)")
    slowest = 0.0
    for name, url in urls.items():
        middle, p95 = timed(client, url, args.repeat)
        slowest = max(slowest, p95)
        print(f"{name:32} {middle:8.1f} {p95:8.1f}")
    print(f"slowest p95 {slowest:.1f} ms: {'within' if slowest < TARGET_MS else 'OVER'} the {TARGET_MS} ms target")
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX run_finished_state_idx")
    middle, p95 = timed(client, urls["runs ?state=failed"], args.repeat)
    print(f"{'runs ?state=failed, no index':32} {middle:8.1f} {p95:8.1f}")
    StatisticsSnapshot.objects.all().delete()
    middle, p95 = timed(client, urls["next 24 hours"], args.repeat)
    print(f"{'next 24 hours, no snapshot':32} {middle:8.1f} {p95:8.1f}")


if __name__ == "__main__":
    main()
