"""The scanner's materialization with and without calendars: one wave of N schedules due at
once, drained by materialize_due transactions; with `--calendar-share 0.5` half the schedules
name a calendar (100 dates, skip policy, none today: every occurrence runs).

    .venv/bin/python bench/calendar_wave.py [--schedules 10000] [--repeat 3] [--database scheduler_bench]

Prints, per share, schedules materialized per second and the p50 / p99 of one
materialize_due transaction (a wave reads its calendars once, in one query).
"""

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import django_on, median, percentile, wave  # noqa: E402


def one_pass(n: int, share: float) -> dict:
    from django.utils import timezone

    from runs import authority
    from schedules.models import Calendar, Schedule, ScheduleCalendar

    tenant = wave(n, timezone.now() - timedelta(seconds=1), name="calendar")
    if share:
        calendar = Calendar.objects.create(
            tenant=tenant, name="holidays",
            exclude_dates=[(date(2030, 1, 1) + timedelta(days=3 * k)).isoformat() for k in range(100)])
        ids = list(Schedule.objects.filter(tenant=tenant).order_by("id").values_list("id", flat=True))[::round(1 / share)]
        Schedule.objects.filter(id__in=ids).update(calendar={"calendarIds": [calendar.id], "policy": "skip"})
        ScheduleCalendar.objects.bulk_create([ScheduleCalendar(schedule_id=i, calendar=calendar) for i in ids])
    durations, done, started = [], 0, time.perf_counter()
    while True:
        began = time.perf_counter()
        stats = authority.materialize_due()
        if not stats.schedules:
            break
        durations.append(time.perf_counter() - began)
        done += stats.schedules
    wall = time.perf_counter() - started
    assert done == n, f"{done} of {n}"
    return {"rate": n / wall, "p50": percentile(durations, 50) * 1000, "p99": percentile(durations, 99) * 1000}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database", default="scheduler_bench")
    args = parser.parse_args()
    print(f"{'calendar share':>15} {'schedules/s':>12} {'txn p50 ms':>11} {'txn p99 ms':>11}   (median of {args.repeat})")
    for share in (0.0, 0.5):
        results = []
        for _ in range(args.repeat):
            django_on(args.database)
            results.append(one_pass(args.schedules, share))
        print(f"{share:15.1f} {median([r['rate'] for r in results]):12.0f} "
              f"{median([r['p50'] for r in results]):11.1f} {median([r['p99'] for r in results]):11.1f}")


if __name__ == "__main__":
    main()
