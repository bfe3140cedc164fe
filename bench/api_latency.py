"""API latency under concurrent load against a real gunicorn process on PostgreSQL.

    .venv/bin/python bench/api_latency.py [--requests 2000] [--concurrency 8] [--workers 2]

Measures p50/p95/p99 of POST /api/v1/schedules and GET /api/v1/runs/{id}; each client
thread keeps one HTTP/1.1 connection, as a real API client would.
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

from _setup import ROOT, django_on, percentile


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(port, token, requests, concurrency, make_request):
    latencies, errors = [], []
    lock = threading.Lock()
    per_thread = requests // concurrency

    def client(index):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        for i in range(per_thread):
            method, path, body = make_request(index, i)
            started = time.perf_counter()
            conn.request(method, path, body=body, headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            mine.append(time.perf_counter() - started)
            if response.status >= 300:
                errors.append(response.status)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, time.perf_counter() - started


def report(name, latencies, errors, elapsed):
    ms = [x * 1000 for x in latencies]
    print(f"{name:<26} n={len(ms):>5}  p50={percentile(ms, 50):6.1f} ms  p95={percentile(ms, 95):6.1f} ms  "
          f"p99={percentile(ms, 99):6.1f} ms  {len(ms) / elapsed:7.0f} req/s  errors={len(errors)}")


@contextmanager
def gunicorn(env: dict, *, workers: int = 2):
    """A gunicorn of ``workers`` x 4 threads serving the API with ``env``, until the block ends;
    yields its port once it answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "scheduler_project.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--threads", "4", "--log-level", "warning", "--no-control-socket"],
        cwd=ROOT, env=env,
    )
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/api/schema/")
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    django_on("scheduler_bench")
    from runs.authority import run_once
    from schedules.tenants import tenant_create

    tenant, token = tenant_create(name="api-bench", max_schedules=10**6)
    with gunicorn(dict(os.environ, LOG_LEVEL="WARNING"), workers=args.workers) as port:
        body = json.dumps({"name": "bench", "jobType": "demo.sleep", "params": {"seconds": 0},
                           "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"}})
        warm = load(port, token, 200, 4, lambda t, i: ("POST", "/api/v1/schedules", body))
        create = load(port, token, args.requests, args.concurrency, lambda t, i: ("POST", "/api/v1/schedules", body))

        from schedules.models import Schedule

        schedule = Schedule.objects.filter(tenant=tenant).first()
        run_ids = [run_once(tenant=tenant, schedule_id=schedule.id)[0].id for _ in range(200)]
        status = load(port, token, args.requests, args.concurrency,
                      lambda t, i: ("GET", f"/api/v1/runs/{run_ids[(t * 31 + i) % len(run_ids)]}", None))
        history = load(port, token, args.requests // 4, args.concurrency,
                       lambda t, i: ("GET", f"/api/v1/schedules/{schedule.id}/runs?limit=50", None))
        del warm
        print(f"gunicorn workers={args.workers} threads=4, {args.concurrency} concurrent clients, PostgreSQL")
        report("POST /schedules", *create)
        report("GET /runs/{id}", *status)
        report("GET /schedules/{id}/runs", *history)


if __name__ == "__main__":
    main()
