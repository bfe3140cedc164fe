"""Cost of the schedule health evaluation over 100,000 schedules with expectations.

    .venv/bin/python bench/health_eval.py [--schedules 100000] [--passes 5]
        [--database scheduler_health_bench]        # PostgreSQL (BENCH_POSTGRES)

One tenant with `--schedules` schedules, each expecting a start within 120 s, a finish
within 600 s and at most 3 failures in a row; their next instants spread over the next
day (so some fall in the forecast's window every pass). Each has a finished run in the
last hour (succeeded); 1 % have a queued run 5 minutes late, 0.5 % a run running for 20
minutes, 0.5 % three failures in a row. Prints, for the first pass (which opens every
incident) and the steady passes after it, the wall time and the database time (the time
spent inside cursor.execute, summed by a connection execute wrapper) of `health_pass`, of
its forecast step and of `alerts_pass` (alert targets on 1 % of the schedules), and the
database time per minute at HEALTH_INTERVAL_SECONDS.
"""

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


class DatabaseTime:
    """Seconds spent inside cursor.execute on this connection while installed."""

    def __init__(self):
        self.seconds = 0.0
        self.statements = 0
        self.slowest = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - started
            self.seconds += took
            self.statements += 1
            self.slowest = sorted([*self.slowest, (took, " ".join(sql.split())[:160])], reverse=True)[:4]


@contextmanager
def measured():
    from django.db import connection

    meter = DatabaseTime()
    started = time.perf_counter()
    with connection.execute_wrapper(meter):
        yield meter
    meter.wall = time.perf_counter() - started


def populate(tenant, count):
    from django.db import connection

    from schedules.models import Schedule

    Schedule.objects.filter(tenant=tenant).update(
        expectations={"startWithinSeconds": 120, "finishWithinSeconds": 600, "maxConsecutiveFailures": 3},
        expect_start_within_seconds=120, expect_finish_within_seconds=600, expect_max_consecutive_failures=3)
    alert = '{"startWithinSeconds": 120, "alert": {"webhook": {"url": "https://hooks.example.com/h"}}}'
    with connection.cursor() as cursor:
        cursor.execute("""
            WITH numbered AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM schedules_schedule
                              WHERE tenant_id = %s)
            UPDATE schedules_schedule s SET next_run_at = now() + (n.i %% 86400) * interval '1 second',
                   expectations = CASE WHEN n.i %% 100 = 7 THEN %s::jsonb ELSE s.expectations END
            FROM numbered n WHERE n.id = s.id""", [tenant.id, alert])
        columns = ("id, schedule_id, tenant_id, trigger, revision, payload, job_type, resource_class, state,"
                   " pending_reason, scheduled_at, due_at, fence, lease_expires_at, attempt_count, dispatch_count,"
                   " max_attempts, holds_guard, strict, cancellation_requested, cancellation_accepted, started_at,"
                   " finished_at, error, progress_message, created_at, backfilled, accepted_attempt_id, result_checksum")

        def runs(prefix, where, state, scheduled, started, finished, lease="NULL", repeat=1):
            cursor.execute(f"""
                INSERT INTO runs_run ({columns})
                SELECT '{prefix}' || n.i || '_' || k, n.id, %s, 'schedule', 1, '{{}}', 'demo.sleep', 'short',
                       '{state}', '', {scheduled}, {scheduled}, 1, {lease}, 1, 1, 3, false, false, false, false,
                       {started}, {finished}, '', '', {scheduled}, false,
                       {"'att_' || '" + prefix + "' || n.i || '_' || k" if state == "succeeded" else "NULL"},
                       {"'sha256:' || repeat('0', 64)" if state == "succeeded" else "NULL"}
                FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM schedules_schedule WHERE tenant_id = %s) n,
                     generate_series(1, {repeat}) k
                WHERE {where.replace("%", "%%")}""", [tenant.id, tenant.id])

        at = "now() - interval '50 minutes' - k * interval '1 minute'"
        runs("run_ok", "true", "succeeded", at, at, at)
        cursor.execute("""
            INSERT INTO runs_attempt (id, run_id, number, fence, worker_label, state, lease_seconds, started_at,
                                      lease_expires_at, finished_at, error)
            SELECT accepted_attempt_id, id, 1, 1, 'bench', 'succeeded', 60, started_at, finished_at, finished_at, ''
            FROM runs_run WHERE accepted_attempt_id IS NOT NULL""")
        runs("run_late", "n.i % 100 = 1", "queued", "now() - interval '5 minutes'", "NULL", "NULL")
        runs("run_long", "n.i % 200 = 2", "running", "now() - interval '20 minutes'", "now() - interval '20 minutes'",
             "NULL", lease="now() + interval '1 hour'")
        failed = "now() - interval '10 minutes' + k * interval '1 minute'"
        runs("run_bad", "n.i % 200 = 3", "failed", failed, failed, failed, repeat=3)
        cursor.execute("ANALYZE")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--database", default="scheduler_health_bench")
    args = parser.parse_args()
    from _setup import django_on, median, wave

    django_on(args.database)
    from datetime import timedelta

    from django.conf import settings

    from effects.alerts import alerts_pass
    from runs.health import forecast as forecast_module
    from runs.health.evaluation import health_pass
    from runs.models import Incident
    from kernel.clock import authority_now

    from django.db import transaction

    tenant = wave(args.schedules, authority_now() + timedelta(days=1), name="health")
    with transaction.atomic():  # the attempts' foreign keys are checked at commit
        populate(tenant, args.schedules)

    step_time = []
    original = forecast_module.forecast_step
    every_minute = settings.HEALTH_FORECAST_INTERVAL_SECONDS
    settings.HEALTH_FORECAST_INTERVAL_SECONDS = 0  # forecast in every pass here, measured on its own

    def timed_step(now):
        with measured() as step:
            result = original(now)
        step_time.append(step)
        return result

    import runs.health.evaluation

    runs.health.evaluation.forecast_step = timed_step  # the name health_pass calls
    figures = []
    for number in range(args.passes):
        with measured() as evaluation:
            stats = health_pass()
        with measured() as alerts:
            created = alerts_pass()
        figures.append((evaluation, alerts))
        if number == 0:  # what autovacuum does after the first pass inserted thousands of incidents
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("ANALYZE runs_incident")
        print(f"pass {number + 1}: health_pass wall {evaluation.wall * 1000:.0f} ms, database "
              f"{evaluation.seconds * 1000:.0f} ms in {evaluation.statements} statements "
              f"(forecast step: database {step_time[-1].seconds * 1000:.0f} ms, wall {step_time[-1].wall * 1000:.0f} ms);"
              f" {stats}; alerts_pass database "
              f"{alerts.seconds * 1000:.0f} ms, {created} intents")
    print("slowest statements of the last pass:")
    for took, sql in figures[-1][0].slowest:
        print(f"  {took * 1000:6.1f} ms  {sql}")
    opened = Incident.objects.values_list("kind").order_by()
    print("open incidents:", {kind: n for kind, n in
                              ((k, sum(1 for (x,) in opened if x == k)) for k in ("late_start", "long_running",
                                                                               "failures", "forecast"))})
    steady = list(zip(figures, step_time))[1:] or list(zip(figures, step_time))
    forecasting = median([step.seconds for _, step in steady])
    per_pass = median([e.seconds + a.seconds - step.seconds for (e, a), step in steady])
    per_minute = per_pass * 60 / settings.HEALTH_INTERVAL_SECONDS + forecasting * 60 / max(every_minute, 1)
    print(f"steady pass: database {per_pass * 1000:.0f} ms without the forecast, forecast step "
          f"{forecasting * 1000:.0f} ms (medians of {len(steady)}); one loop at HEALTH_INTERVAL_SECONDS="
          f"{settings.HEALTH_INTERVAL_SECONDS:g} forecasting every {every_minute} s: {per_minute:.2f} s of "
          f"database time per minute for {args.schedules:,} schedules")


if __name__ == "__main__":
    main()
