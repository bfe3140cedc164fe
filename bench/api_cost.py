"""What one API request costs in CPU, in the web process and in PostgreSQL, over a history.

    .venv/bin/python bench/history.py --rows 2000000 --load-only   # the history, once
    .venv/bin/python bench/api_cost.py [--database scheduler_history] [--requests 1000] [--repeat 3]
    .venv/bin/python bench/api_cost.py --database scheduler_burst --tenant burst-   # after bench/burst.py

One process calls the web entry point's WSGI application directly (scheduler_project.wsgi:
its middleware, its connection pool), one request after another, for `GET /runs/{id}` (runs
of a history tenant, at random), a schedule's page of 50 and the tenant's runs page of 50.
Per request it prints the CPU of this process and of the database's backends (read from
/proc), the median of ``--repeat`` rounds. With nothing waiting, these are what a request
costs, which on a loaded two-core machine is what its latency under 8 clients follows, and
they move far less between runs than the latency does (bench/history.py --api-only).
"""

import argparse
import io
import os
import random
import sys
import time

from _setup import SERVER, BackendsCpu, median


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="scheduler_history", help="a database bench/history.py loaded")
    parser.add_argument("--requests", type=int, default=1000, help="requests per round and endpoint")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per endpoint (the median is printed)")
    parser.add_argument("--tenant", default="history",
                        help="the tenant whose runs are read, by the start of its name (bench/burst.py's: burst-)")
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", f"{SERVER}/{args.database}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["API_RATE_LIMIT_PER_SECOND"] = "0"
    from scheduler_project.wsgi import application  # the web process's pool, as gunicorn has it

    from django.db import connection

    from schedules.models import Schedule, Tenant
    from schedules.tenants import tenant_token_create

    tenant = Tenant.objects.filter(name__startswith=args.tenant).order_by("-id").first()
    if tenant is None:
        raise SystemExit(f"{args.database} holds no tenant {args.tenant}*: run bench/history.py --rows N --load-only")
    _, token = tenant_token_create(tenant=tenant, name="api-cost")
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM runs_run WHERE tenant_id = %s AND id IN"
                       " (SELECT id FROM runs_run TABLESAMPLE SYSTEM (1)) LIMIT 200", [tenant.id])
        run_ids = [row[0] for row in cursor.fetchall()]
    schedule_ids = list(Schedule.objects.filter(tenant=tenant).values_list("id", flat=True)[:10])
    connection.close()  # back to the pool: the requests take it from there
    paths = {
        "GET /runs/{id}": lambda i: f"/api/v1/runs/{run_ids[i % len(run_ids)]}",
        "a schedule's page of 50": lambda i: f"/api/v1/schedules/{schedule_ids[i % len(schedule_ids)]}/runs?limit=50",
        "the runs page of 50": lambda i: "/api/v1/runs?limit=50",
    }
    random.seed(1)
    for name, path in paths.items():
        for i in range(100):  # warm: the pool, prepared statements, caches
            request(application, path(i), token)
        python, postgres = [], []
        for _ in range(args.repeat):
            backends = BackendsCpu(args.database)
            backends.sample()
            started = time.process_time()
            for i in range(args.requests):
                request(application, path(random.randrange(10**6)), token)
            python.append((time.process_time() - started) / args.requests * 1000)
            backends.sample()
            postgres.append(backends.total() / args.requests * 1000)
        print(f"{name}: CPU per request, this process {median(python):.2f} ms"
              f" ({', '.join(f'{x:.2f}' for x in python)}), PostgreSQL {median(postgres):.2f} ms"
              f" ({', '.join(f'{x:.2f}' for x in postgres)})", flush=True)


def request(application, path: str, token: str) -> None:
    """One GET through the WSGI application, as gunicorn hands it one; refused unless 200."""
    route, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": route, "QUERY_STRING": query, "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_AUTHORIZATION": f"Bearer {token}", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr, "wsgi.version": (1, 0), "wsgi.multithread": True,
        "wsgi.multiprocess": True, "wsgi.run_once": False,
    }
    status = []
    body = b"".join(application(environ, lambda code, headers, exc_info=None: status.append(code)))
    if not status[0].startswith("200"):
        raise SystemExit(f"{path}: {status[0]} {body[:300]!r}")


if __name__ == "__main__":
    main()
