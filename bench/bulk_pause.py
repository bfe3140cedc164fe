"""Cost of a bulk pause and of its resume over a large filter match, and what it costs
another writer meanwhile.

    .venv/bin/python bench/bulk_pause.py [--schedules 100000] [--resume 10000]
        [--database scheduler_bulk_bench]        # PostgreSQL (BENCH_POSTGRES)

One tenant with `--schedules` schedules labelled team:finance (daily, due tomorrow).
Prints the bulk pause's wall time, its transactions (BULK_BATCH schedules each), and the
longest an ordinary PATCH of one matching schedule waited while it ran (locks are held by
one batch at a time). Then the resume of an action over `--resume` of them: the request's
wall time (it ends every pause and resumes the first RESUME_INLINE), and the time one
scanner takes to resume the rest (each planned and written in a transaction of its own).
"""

import argparse
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--resume", type=int, default=10_000)
    parser.add_argument("--database", default="scheduler_bulk_bench")
    args = parser.parse_args()
    from _setup import django_on, wave

    django_on(args.database)
    from django.db import close_old_connections, connection

    from runs.authority import resume_due_pauses, schedules_resume_action
    from runs.authority.resume import RESUME_INLINE
    from schedule_services import bulk
    from schedule_services.bulk import schedules_pause_matching
    from schedules.models import Schedule, ScheduleLabel
    from schedule_services.lifecycle import schedule_update
    from schedules.specs import ScheduleSpec
    from kernel.clock import authority_now

    tenant = wave(args.schedules, authority_now() + timedelta(days=1), name="bulk")
    ids = list(Schedule.objects.filter(tenant=tenant).order_by("id").values_list("id", flat=True))
    Schedule.objects.filter(tenant=tenant).update(labels={"team": "finance"})
    for start in range(0, len(ids), 10_000):
        ScheduleLabel.objects.bulk_create([ScheduleLabel(schedule_id=i, tenant=tenant, key="team", value="finance")
                                           for i in ids[start:start + 10_000]])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    waits, stop = [], threading.Event()

    def editor():
        target = ids[len(ids) // 2]
        try:
            while not stop.is_set():
                revision = Schedule.objects.get(id=target).revision
                began = time.monotonic()
                schedule_update(tenant=tenant, schedule_id=target, expected_revision=revision,
                                changes=ScheduleSpec(params={"seconds": revision % 7}))
                waits.append(time.monotonic() - began)
                time.sleep(0.01)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=editor)
    thread.start()
    began = time.monotonic()
    action = schedules_pause_matching(tenant=tenant, labels={"team": "finance"}, job_type=None, reason="bench")
    paused_seconds = time.monotonic() - began
    stop.set()
    thread.join()
    print(f"bulk pause: {action.paused} schedules in {paused_seconds:.1f} s, "
          f"{-(-action.paused // bulk.BULK_BATCH)} transactions of at most {bulk.BULK_BATCH}")
    if waits:
        print(f"  a concurrent edit of a matching schedule: {len(waits)} edits, median "
              f"{statistics.median(waits) * 1000:.1f} ms, longest {max(waits) * 1000:.1f} ms")

    keep = ids[args.resume:]
    Schedule.objects.filter(id__in=keep).update(pause_action=None)  # the resume covers --resume of them
    began = time.monotonic()
    _, ended = schedules_resume_action(tenant=tenant, action_id=action.id)
    seconds = time.monotonic() - began
    print(f"bulk resume request: ended {ended} pauses in {seconds:.1f} s (the first {RESUME_INLINE} resumed in it)")
    began, resumed = time.monotonic(), 0
    while True:
        done = resume_due_pauses(batch_size=500)
        resumed += done
        if not done:
            break
    seconds = time.monotonic() - began
    print(f"  then one scanner resumed the other {resumed} in {seconds:.1f} s, "
          f"{seconds / max(resumed, 1) * 1000:.2f} ms each (scanners share this by bucket)")

if __name__ == "__main__":
    main()
