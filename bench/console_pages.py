"""Console pages' server time on a database with ~1 M runs (target: no page over 200 ms).

    .venv/bin/python bench/console_pages.py [--runs 1000000] [--repeat 9] [--database scheduler_console_bench]

Seeds two tenants (90 % and 10 % of the runs) with 1,100 hourly schedules cloned from one
made through the services, and their history straight in SQL (INSERT ... SELECT
generate_series, one transaction per chunk): one run an hour per schedule back from now, each
with its accepted attempt, one in 10,007 failed, one in 500 with an expired attempt before it.
Then times each console page through Django's test client, in process (server time:
middleware, view, queries, template), and prints the median of `--repeat` calls per page.
Last, it drops run_finished_state_idx and times the failed-runs page again: the figure
without the index.
"""

import argparse
import os
import time
from datetime import datetime, timezone
from urllib.parse import urlencode

from _setup import clone_schedule, django_on, median

SCHEDULES = 1100
BIG_SHARE = 0.9
CHUNK_SCHEDULES = 100

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


def seed(total_runs: int) -> dict:
    from django.db import connection, transaction

    from runs.capacity.live import slots_report
    from scheduler_project.http.schedule_requests import schedule_spec
    from scheduler_project.progress import progress
    from schedules.services import schedule_create
    from schedules.tenants import tenant_create

    per = max(1, total_runs // SCHEDULES)
    tenants = {}
    offset = 0
    with progress("runs seeded", total=per * SCHEDULES) as advance:
        for name, share in (("big", BIG_SHARE), ("small", 1 - BIG_SHARE)):
            count = round(SCHEDULES * share)
            tenant, _ = tenant_create(name=name, max_schedules=10**6, max_active_runs=10**6)
            template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
                "name": f"{name}-hourly", "jobType": "demo.sleep", "params": {"seconds": 0},
                "recurrence": {"kind": "cron", "cron": "0 * * * *"}}))
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
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE runs_run")
        cursor.execute("VACUUM ANALYZE runs_attempt")
        cursor.execute("SELECT count(*), count(*) FILTER (WHERE state = 'failed') FROM runs_run")
        runs, failed = cursor.fetchone()
    slots_report("bench:console", {"short": 200}, ttl_seconds=3600)
    print(f"seeded {runs} runs ({failed} failed) for {SCHEDULES} schedules")
    return tenants


def pages(tenants) -> dict[str, str]:
    from runs.models import Run

    big = tenants["big"]
    failed = Run.objects.filter(tenant=big, state="failed").order_by("-scheduled_at", "-id")
    older = failed[49] if failed.count() > 50 else failed.last()
    run = Run.objects.filter(tenant=big).order_by("-scheduled_at").first()
    before = urlencode({"before": f"{older.scheduled_at.isoformat()}~{older.id}"})
    return {
        "overview": "/console/",
        "next 24 hours": "/console/next-24-hours/",
        "schedules": "/console/schedules/",
        "schedules ?q=small": "/console/schedules/?q=small",
        "schedule page": f"/console/schedules/{run.schedule_id}/",
        "runs (big tenant)": f"/console/runs/?tenant={big.id}",
        "runs ?state=failed": f"/console/runs/?tenant={big.id}&state=failed",
        "runs ?state=failed, page 2": f"/console/runs/?tenant={big.id}&state=failed&{before}",
        "run page": f"/console/runs/{run.id}/",
        "uncertain effects": "/console/effects/",
    }


def timed(client, url: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE", "scheduler_console_bench"))
    args = parser.parse_args()
    django_on(args.database)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    started = time.perf_counter()
    tenants = seed(args.runs)
    print(f"seeding took {time.perf_counter() - started:.0f} s")
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password="x", is_staff=True))
    urls = pages(tenants)
    print(f"{'page':32} median ms ({args.repeat} calls, at {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)")
    for name, url in urls.items():
        print(f"{name:32} {timed(client, url, args.repeat):8.1f}")
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX run_finished_state_idx")
    print(f"{'runs ?state=failed, no index':32} {timed(client, urls['runs ?state=failed'], args.repeat):8.1f}")


if __name__ == "__main__":
    main()
