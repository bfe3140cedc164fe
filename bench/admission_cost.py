"""Cost of admission and of the capacity forecast with hostile tenants, and what it costs the
other tenants' writes.

    .venv/bin/python bench/admission_cost.py [--sizes 1,100,1000] [--creates 5] [--slots 8]
        [--database scheduler_admission_bench]        # PostgreSQL (BENCH_POSTGRES)
    .venv/bin/python bench/admission_cost.py --embedded  # the embedded SQLite, in a temporary directory

For each size N: three tenants with N schedules each. Tenants B and C are the issue's
hostile shape: every one of their schedules is due every second from an hour ahead (an
interval anchored there; none has run yet), a tenth of them strict (startDeadlineSeconds
86400), so the slots are far from enough from then on. Tenant A has N ordinary daily
schedules at distinct minutes. `--slots` live short slots (8: the embedded dispatcher's).

Then, through the API in process (Django's test client, the whole request stack):

- strict create: A creates `--creates` daily schedules with startDeadlineSeconds 3600, one
  at a time; median and worst ms (and how many were admitted);
- forecast: GET /api/v1/capacity/forecast of the default hour, of the 24 hours from the
  hostile load's start, and of 7 days, as tenant A and as the operator; ms each, and the
  status (400: the range is more than one forecast simulates);
- another tenant's write: while A's strict creates run on one connection, tenant B creates
  ordinary schedules and asks for manual runs on another, back to back; the longest of
  those writes (and their median) against the same writes with no admission running.
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def prepare(args):
    if args.embedded:
        var = tempfile.mkdtemp(prefix="admission-bench-")
        os.environ.pop("DATABASE_URL", None)
        os.environ["SCHEDULER_VAR_DIR"] = var
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        os.environ.setdefault("SECRET_KEY", "bench-" + "x" * 40)
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        return lambda: call_command("flush", interactive=False, verbosity=0)
    from _setup import django_on

    django_on(args.database)
    return lambda: django_on(args.database)


def seed(n: int, slots: int):
    from django.conf import settings
    from _setup import clone_schedule
    from runs.capacity.live import slots_report
    from kernel.clock import authority_now, instant
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedules.models import Schedule
    from schedule_services.lifecycle import schedule_create
    from schedules.tenants import operator_token_create, tenant_create

    settings.API_RATE_LIMIT_PER_SECOND = 0
    now = authority_now()
    hostile_from = (now + timedelta(hours=1)).replace(second=0, microsecond=0)
    tenants = {}
    for name in ("a", "b", "c"):
        tenant, secret = tenant_create(name=name, max_schedules=max(1000, 2 * n))
        tenants[name] = (tenant, secret)
    a = tenants["a"][0]
    for k in range(n):  # ordinary dailies at distinct minutes
        schedule_create(tenant=a, spec=schedule_spec({
            "name": f"a-{k}", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": f"{k % 60} {(k // 60) % 24} * * *"}}))
    for name in ("b", "c"):
        tenant = tenants[name][0]
        template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": f"{name}-every-second", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "interval", "everySeconds": 1, "anchor": instant(hostile_from)}}))
        if n > 1:
            clone_schedule(template, n - 1, hostile_from)
        strict = list(Schedule.objects.filter(tenant=tenant).values_list("id", flat=True)[: n // 10])
        Schedule.objects.filter(id__in=strict).update(start_deadline_seconds=86400)
    slots_report("bench:slots", {"short": slots}, ttl_seconds=24 * 3600)
    _, operator = operator_token_create("bench")
    return tenants, operator, hostile_from


def client(secret):
    from rest_framework.test import APIClient

    c = APIClient()
    c.default_format = "json"
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return c


def timed(call):
    began = time.perf_counter()
    response = call()
    return response, (time.perf_counter() - began) * 1000


def strict_body(k: int) -> dict:
    return {"name": f"strict-{k}-{time.time_ns()}", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": f"{(7 * k) % 60} 7 * * *"}, "startDeadlineSeconds": 3600}


def other_writes(secret, stop: threading.Event, took: list):
    """Tenant B's ordinary writes back to back until `stop`: a create, then a manual run of it."""
    from django.db import connection

    b = client(secret)
    k = 0
    try:
        while not stop.is_set():
            k += 1
            response, ms = timed(lambda: b.post("/api/v1/schedules", {
                "name": f"b-write-{k}-{time.time_ns()}", "jobType": "demo.sleep", "params": {"seconds": 0},
                "recurrence": {"kind": "cron", "cron": "0 3 * * *"}}))
            took.append((ms, response.status_code))
            if response.status_code == 201:
                schedule_id = response.json()["scheduleId"]
                response, ms = timed(lambda: b.post(f"/api/v1/schedules/{schedule_id}/runs", {}))
                took.append((ms, response.status_code))
    finally:
        connection.close()


def measure(n: int, args) -> dict:
    from _setup import median
    from kernel.clock import authority_now, instant

    tenants, operator, hostile_from = seed(n, args.slots)
    a, b = client(tenants["a"][1]), tenants["b"][1]
    figures = {"size": n}

    # B's writes alone: the baseline.
    stop, alone = threading.Event(), []
    writer = threading.Thread(target=other_writes, args=(b, stop, alone))
    writer.start()
    time.sleep(2)
    stop.set()
    writer.join()

    # A's strict creates while B writes.
    stop, during = threading.Event(), []
    writer = threading.Thread(target=other_writes, args=(b, stop, during))
    writer.start()
    creates = []
    for k in range(args.creates):
        response, ms = timed(lambda: a.post("/api/v1/schedules", strict_body(k)))
        creates.append((ms, response.status_code))
    stop.set()
    writer.join()
    figures["create_ms"] = (median([ms for ms, _ in creates]), max(ms for ms, _ in creates))
    figures["admitted"] = sum(status == 201 for _, status in creates)
    figures["other_write_ms"] = (median([ms for ms, _ in during]), max(ms for ms, _ in during), len(during))
    figures["other_write_alone_ms"] = (median([ms for ms, _ in alone]), max(ms for ms, _ in alone))
    figures["other_write_failed"] = sum(status not in (200, 201) for _, status in during)

    start = authority_now().replace(second=0, microsecond=0)
    ranges = {
        "1 h (default)": {},
        "24 h of the load": {"from": instant(hostile_from - timedelta(minutes=1)),
                             "to": instant(hostile_from + timedelta(hours=23, minutes=59))},
        "7 days": {"from": instant(start), "to": instant(start + timedelta(days=7))},
    }
    for label, query in ranges.items():
        for who, caller in (("tenant", a), ("operator", client(operator))):
            response, ms = timed(lambda: caller.get("/api/v1/capacity/forecast", query))
            figures[f"forecast {label} {who}"] = (ms, response.status_code)
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--creates", type=int, default=5)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--embedded", action="store_true", help="the embedded SQLite instead of PostgreSQL")
    parser.add_argument("--database", default="scheduler_admission_bench")
    args = parser.parse_args()
    reset = prepare(args)
    from django.db import connection

    print(f"database: {connection.vendor}; {args.slots} live short slots; 3 tenants; {args.creates} strict creates")
    for k, n in enumerate(int(s) for s in args.sizes.split(",")):
        if k:
            reset()
        f = measure(n, args)
        print(f"\n{n} schedules per tenant")
        print(f"  strict create: median {f['create_ms'][0]:.0f} ms, worst {f['create_ms'][1]:.0f} ms "
              f"({f['admitted']} of {args.creates} admitted)")
        median_ms, worst, count = f["other_write_ms"]
        print(f"  tenant B's writes during them: median {median_ms:.0f} ms, longest {worst:.0f} ms ({count} writes, "
              f"{f['other_write_failed']} failed); alone: median {f['other_write_alone_ms'][0]:.0f} ms, "
              f"longest {f['other_write_alone_ms'][1]:.0f} ms")
        for key, value in f.items():
            if key.startswith("forecast"):
                print(f"  {key}: {value[0]:.0f} ms ({value[1]})")


if __name__ == "__main__":
    main()
