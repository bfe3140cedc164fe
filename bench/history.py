"""The hot path on a database that already holds history: finished runs loaded set-based,
then the burst (bench/burst.py) run on top of them, at each size asked for.

    .venv/bin/python bench/history.py --rows 0 2000000 [10000000 ...] [--runs 10000] [--peer]
    .venv/bin/python bench/history.py --rows 2000000 --load-only
    .venv/bin/python bench/history.py --rows 2000000 --api-only    # the API alone over that history
    .venv/bin/python bench/history.py --rows 0 2000000 --wave-only  # the 10,000-cron wave alone

History is what a real deployment holds after weeks: N finished runs spread over the past 30
days across 100 tenants and 1,000 schedules, each with its attempt, its stored object and its
served dispatch intent, every 10th with a sent effect intent, each row written through the
versions the hot path writes (_load_chunk); then VACUUM ANALYZE, as autovacuum would have done
long before the wave. Sizes are loaded in increasing order into one database
(``scheduler_history``), each on top of the last, 250,000 runs per transaction, each vacuumed
(about 1,700 runs/s on 2 cores: 20 minutes for 2 M).
Size 0 runs the same burst on an empty database (``scheduler_burst``) in the same invocation,
the baseline of the ratio. After the burst and the API, the 10,000-cron wave
(bench/peer_beat.py --mode ours --n 10000, --keep on a history: first publication, the
relay's backstop held off) on the same database. Each size ends with one line:

    history 2,000,000: burst 712 runs/s (empty 735, ratio 0.97), p99 13.9 s, PostgreSQL 0.93 ms/run
      (all postgres processes 0.95); API p95 GET /runs/{id} 41.0 ms, schedule history page 60.2 ms,
      runs page 70.3 ms; wave p99 0.95 s (empty 0.91, ratio 1.04), 10,000 of 10,000 published;
      per run WAL 4.3 KB, 0.12 full-page images, 0.04 pages of runs_run read
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, SERVER, django_on

DATABASE = "scheduler_history"
TENANTS, SCHEDULES, CHUNK = 100, 1000, 250_000
SPAN_SECONDS = 30 * 86400
# A demo.sleep run's payload as materialization writes it (runs.authority.materialize.run_payload).
PAYLOAD = json.dumps({"retry": {"maxAttempts": 3, "maxDelaySeconds": 300.0, "initialDelaySeconds": 5.0},
                      "params": {"seconds": 0}, "effects": {}, "jobType": "demo.sleep", "leaseSeconds": 30,
                      "scheduleName": "history", "resourceClass": "short", "timeoutSeconds": 3600,
                      "paramsSchemaVersion": 1})
ID_PREFIX = "run_00"  # below every id new_id() makes today ("run_01..."): history sorts first, as it would


def history_ids(i: str) -> dict[str, str]:
    """SQL expressions of the ids of history row ``i`` (an SQL integer expression)."""
    n = f"lpad(({i})::text, 24, '0')"
    return {"run": f"'{ID_PREFIX}' || {n}", "attempt": f"'att_00' || {n}", "effect": f"'eff_00' || {n}"}


def result_checksum(number: str) -> str:
    """SQL expression of the result checksum of history row ``number`` (an SQL integer
    expression: the row's number, or ``substr(run_id, 7)::bigint`` read back from its id)."""
    return f"'sha256:' || md5(({number})::text) || md5(({number})::text)"


def loaded(cursor) -> int:
    """How many history runs the database holds (their ids count up from 1)."""
    cursor.execute("SELECT id FROM runs_run WHERE id < 'run_01' ORDER BY id DESC LIMIT 1")
    row = cursor.fetchone()
    return int(row[0][len(ID_PREFIX):]) if row else 0


def ensure_schedules() -> None:
    """The history's 100 tenants and 1,000 schedules, numbered 0-999 in history_schedules."""
    from django.db import connection

    from _setup import clone_schedule
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedule_services.lifecycle import schedule_create
    from schedules.tenants import tenant_create

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS history_schedules (n int PRIMARY KEY, id varchar(40), tenant_id varchar(40))")
        cursor.execute("SELECT count(*) FROM history_schedules")
        if cursor.fetchone()[0] == SCHEDULES:
            return
    for t in range(TENANTS):
        tenant, _ = tenant_create(name=f"history-{t:03d}", max_active_runs=10**6, max_schedules=10**6)
        template, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": f"history-{t:03d}", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": "0 0 1 1 *"}, "overlapPolicy": "allow"}))
        clone_schedule(template, SCHEDULES // TENANTS - 1, template.next_run_at)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO history_schedules SELECT row_number() OVER (ORDER BY s.id) - 1, s.id, s.tenant_id"
            " FROM schedules_schedule s JOIN schedules_tenant t ON t.id = s.tenant_id WHERE t.name LIKE 'history-%%'")


def load(target: int) -> None:
    """Add history runs until the database holds ``target``, a chunk at a time, each chunk
    vacuumed as autovacuum would have (its dead versions are room the next chunk's rows
    take); then VACUUM ANALYZE."""
    from django.db import connection, transaction

    ensure_schedules()
    with connection.cursor() as cursor:
        have = loaded(cursor)
    if have >= target:
        return
    started = time.monotonic()
    for lo in range(have + 1, target + 1, CHUNK):
        hi = min(target, lo + CHUNK - 1)
        with transaction.atomic(), connection.cursor() as cursor:
            _load_chunk(cursor, lo, hi)
        vacuum(*HISTORY_TABLES, analyze=False)
        rate = (hi - have) / (time.monotonic() - started)
        print(f"  loaded {hi:,} of {target:,} runs ({rate:,.0f} runs/s)", flush=True)
    seconds = vacuum()
    print(f"  VACUUM ANALYZE in {seconds:.0f} s", flush=True)


def _load_chunk(cursor, lo: int, hi: int) -> None:
    """History runs ``lo..hi``: row i belongs to schedule i % 1000, its instant spread over the
    30 days before now (each chunk's own now(), and a microsecond per chunk, keep chunks from
    sharing an instant). Payload: what materialization snapshots for such a schedule.

    Each row is written in the versions the hot path writes it, so that pages hold what a
    real history leaves in them: a run queued, running, then finished; an attempt running,
    then ended; a stored object staged, referenced, then counted; a dispatch intent written,
    published, then processed (an effect intent, every 10th run's, is written once, sent).
    Rows written once each, already finished, fill every page to its fillfactor and leave
    each the same room, a little more than a queued run: every new run of a wave then went to
    a page of its own across the history (one page read and one full-page image per run),
    where a history written through the versions holds its free room in fewer, emptier pages
    (BENCHMARKS.md, "A history written as the hot path writes it")."""
    ids = history_ids("g.i")
    rows = (
        f"WITH g AS (SELECT i, h.id AS schedule_id, h.tenant_id,"
        f"  now() - interval '{SPAN_SECONDS} seconds'"
        f"   + ((i - {lo})::float8 / {hi - lo + 1} * {SPAN_SECONDS} + {lo // CHUNK} * 1e-6) * interval '1 second' AS at"
        f"  FROM generate_series({lo}, {hi}) AS i JOIN history_schedules AS h ON h.n = i % {SCHEDULES})"
    )
    key = f"'history/' || {ids['run']} || '/result.json'"
    checksum = result_checksum("g.i")
    bounds = {name: [history_ids(str(i))[name] for i in (lo, hi)] for name in ("run", "attempt")}
    chunk_runs = "id BETWEEN {} AND {}".format(*bounds["run"])
    chunk_attempts = "id BETWEEN {} AND {}".format(*bounds["attempt"])
    chunk_of_runs = "run_id BETWEEN {} AND {}".format(*bounds["run"])
    cursor.execute(
        f"{rows} INSERT INTO runs_run (id, schedule_id, tenant_id, trigger, revision, payload, job_type,"
        f" resource_class, state, pending_reason, scheduled_at, due_at, fence, attempt_count, dispatch_count,"
        f" max_attempts, holds_guard, strict, cancellation_requested, cancellation_accepted, error,"
        f" progress_message, created_at)"
        f" SELECT {ids['run']}, g.schedule_id, g.tenant_id, 'schedule', 1, '{PAYLOAD}'::jsonb, 'demo.sleep', 'short',"
        f"  'queued', '', g.at, g.at, 0, 0, 1, 3, false, false, false, false, '', '', g.at FROM g")
    cursor.execute(
        f"{rows} INSERT INTO runs_outbox (kind, action_key, run_id, resource_class, created_at, relay_until,"
        f" published_at, processed_at, publish_attempts, last_error, broker_epoch)"
        f" SELECT 'dispatch', 'dispatch:' || {ids['run']} || ':1', {ids['run']}, 'short', g.at, NULL,"
        f"  NULL, NULL, 0, '', '' FROM g")
    cursor.execute(f"UPDATE runs_outbox SET published_at = created_at + interval '10 ms', publish_attempts = 1,"
                   f" broker_epoch = 'history' WHERE {chunk_of_runs}")
    cursor.execute(
        f"{rows} INSERT INTO runs_attempt (id, run_id, number, fence, worker_label, worker_token_id, state,"
        f" lease_seconds, started_at, lease_expires_at, finished_at, error, retryable)"
        f" SELECT {ids['attempt']}, {ids['run']}, 1, 1, 'history@bench', NULL, 'running', 30,"
        f"  g.at + interval '50 ms', g.at + interval '30 seconds', NULL, '', NULL FROM g")
    cursor.execute(
        f"UPDATE runs_run SET state = 'running', fence = 1, attempt_count = 1, started_at = scheduled_at + interval"
        f" '50 ms', lease_expires_at = scheduled_at + interval '30 seconds', current_attempt_id = 'att' || substr(id, 4)"
        f" WHERE {chunk_runs}")
    cursor.execute(f"UPDATE runs_outbox SET processed_at = created_at + interval '50 ms' WHERE {chunk_of_runs}")
    cursor.execute(
        f"{rows} INSERT INTO runs_storedobject (key, run_id, attempt_id, fence, state, content_type, filename,"
        f" created_at) SELECT {key}, {ids['run']}, {ids['attempt']}, 1, 'staged', 'application/json', '',"
        f"  g.at + interval '60 ms' FROM g")
    cursor.execute(
        f"UPDATE runs_storedobject SET version_id = 'v1', checksum = {result_checksum('substr(run_id, 7)::bigint')},"
        f" size = 96, uploaded_at = created_at + interval '30 ms' WHERE {chunk_of_runs}")
    cursor.execute(f"UPDATE runs_attempt SET state = 'succeeded', finished_at = started_at + interval '50 ms'"
                   f" WHERE {chunk_attempts}")
    cursor.execute(
        f"UPDATE runs_run SET state = 'succeeded', finished_at = scheduled_at + interval '100 ms',"
        f" accepted_attempt_id = current_attempt_id, result_key = 'history/' || id || '/result.json',"
        f" result_version_id = 'v1', result_checksum = {result_checksum('substr(id, 7)::bigint')},"
        f" result_size = 96, result_content_type = 'application/json'"
        f" WHERE {chunk_runs}")
    cursor.execute(f"UPDATE runs_storedobject SET state = 'referenced', referenced_at = created_at + interval '40 ms'"
                   f" WHERE {chunk_of_runs}")
    cursor.execute(f"UPDATE runs_storedobject SET counted = true WHERE {chunk_of_runs}")
    cursor.execute(
        f"{rows} INSERT INTO effects_effectintent (id, action, run_id, kind, target, result_key, result_version_id,"
        f" result_checksum, state, external_id, delivery_count, next_attempt_at, resolution, reason, created_at,"
        f" updated_at)"
        f" SELECT {ids['effect']}, 'email:' || {ids['run']}, {ids['run']}, 'email',"
        f"  '{{\"to\": [\"ops@example.com\"]}}'::jsonb, {key}, 'v1', {checksum}, 'sent', '<' || g.i || '@history>',"
        f"  1, NULL, '', '', g.at + interval '100 ms', g.at + interval '200 ms' FROM g WHERE g.i % 10 = 0")


HISTORY_TABLES = ("runs_run", "runs_attempt", "runs_storedobject", "runs_outbox", "effects_effectintent")


def vacuum(*tables: str, analyze: bool = True) -> float:
    """VACUUM (ANALYZE) ``tables`` (all of the database's without); its seconds."""
    import psycopg

    started = time.monotonic()
    with psycopg.connect(f"{SERVER}/{DATABASE}", autocommit=True) as conn:
        conn.execute(f"VACUUM{' ANALYZE' if analyze else ''} {', '.join(tables)}")
    return time.monotonic() - started


def table_bytes() -> dict[str, int]:
    """Bytes of each history table, its indexes and TOAST included."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
                       [list(HISTORY_TABLES)])
        return dict(cursor.fetchall())


def burst(database: str, keep: bool, args) -> dict:
    """bench/burst.py on ``database``; its figures."""
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    command = [sys.executable, str(ROOT / "bench" / "burst.py"), "--mode", "redis", "--runs", str(args.runs),
               "--workers", "2", "--concurrency", "4", "--database", database, "--json", str(out)]
    if keep:
        command.append("--keep")
    if args.peer:
        command.append("--peer")
    subprocess.run(command, check=True, env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"})
    figures = json.loads(out.read_text())
    out.unlink()
    return figures


def wave(database: str, keep: bool) -> dict:
    """bench/peer_beat.py's 10,000-cron wave (scanner and relay) on ``database``; its figures."""
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    command = [sys.executable, str(ROOT / "bench" / "peer_beat.py"), "--mode", "ours", "--n", "10000",
               "--cap", "90", "--json", str(out)] + (["--keep"] if keep else [])
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    subprocess.run(command, check=True, env=env | {"PEER_DATABASE": database, "RELAY_REPUBLISH_AFTER_SECONDS": "600"})
    (figures,) = json.loads(out.read_text())
    out.unlink()
    return figures


def api(database: str, tenant_name: str, args, *, analyze: bool) -> dict:
    """p95 of ``GET /runs/{id}`` (runs of the tenant's history, at random), a schedule's
    history page and the tenant's runs page of 50, with 8 clients on gunicorn 2 x 4 threads
    against ``database``; rate limiting off. ``analyze``: ANALYZE the tables the API reads
    first, as autovacuum would tables that grew from nothing by a burst (the bench's server
    runs without it; a history is analyzed once loaded, and a burst adds too little to it).
    Left unanalyzed, the runs page's prepared read of attempts and effect intents cost
    PostgreSQL 2.17 ms a page against 0.93 (bench/api_cost.py after a burst). Prints
    each request's p50 with one client alone (its cost with nothing to wait for), then p50,
    p95 and requests/s with 8: on two cores the 8 clients mostly wait for each other."""
    import psycopg

    from api_latency import gunicorn, load
    from _setup import percentile

    url = f"{SERVER}/{database}"
    with psycopg.connect(url, autocommit=True) as conn:
        if analyze:
            conn.execute("ANALYZE runs_run, runs_attempt, effects_effectintent, schedules_schedule")
        tenant_id = conn.execute("SELECT id FROM schedules_tenant WHERE name LIKE %s ORDER BY id DESC LIMIT 1",
                                 [tenant_name]).fetchone()[0]
        run_ids = [row[0] for row in conn.execute(
            "SELECT id FROM runs_run WHERE tenant_id = %s AND id IN (SELECT id FROM runs_run TABLESAMPLE SYSTEM (1))"
            " LIMIT 200", [tenant_id])] or [row[0] for row in conn.execute(
            "SELECT id FROM runs_run WHERE tenant_id = %s LIMIT 200", [tenant_id])]
        schedule_ids = [row[0] for row in conn.execute(
            "SELECT id FROM schedules_schedule WHERE tenant_id = %s LIMIT 10", [tenant_id])]
    token = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from schedules.models import Tenant;"
         " from schedules.tenants import tenant_token_create;"
         f" print(tenant_token_create(tenant=Tenant.objects.get(id='{tenant_id}'), name='history-bench')[1])"],
        cwd=ROOT, env=dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="scheduler_project.settings"),
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    requests = {
        "run": lambda t, i: ("GET", f"/api/v1/runs/{run_ids[(t * 31 + i) % len(run_ids)]}", None),
        "schedule_page": lambda t, i: ("GET", f"/api/v1/schedules/{schedule_ids[(t + i) % len(schedule_ids)]}"
                                              "/runs?limit=50", None),
        "runs_page": lambda t, i: ("GET", "/api/v1/runs?limit=50", None),
    }
    figures = {}
    with gunicorn(dict(os.environ, DATABASE_URL=url, LOG_LEVEL="WARNING", API_RATE_LIMIT_PER_SECOND="0")) as port:
        for name, request in requests.items():
            load(port, token, 80, 8, request)  # warm: connections, caches
            # One client alone: what a request costs with nothing to wait for.
            alone, errors, _ = load(port, token, args.requests // 8, 1, request)
            latencies, more, elapsed = load(port, token, args.requests, 8, request)
            if errors or more:
                raise SystemExit(f"{name}: {len(errors + more)} errors, first {(errors + more)[0]}")
            ms = [x * 1000 for x in latencies]
            figures[name] = percentile(ms, 95)
            print(f"  API {name}: 1 client p50 {percentile([x * 1000 for x in alone], 50):.1f} ms; 8 clients p50 "
                  f"{percentile(ms, 50):.1f} ms, p95 {figures[name]:.1f} ms, {len(ms) / elapsed:,.0f} requests/s",
                  flush=True)
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", required=True, help="history sizes, in runs (0: empty)")
    parser.add_argument("--runs", type=int, default=10000, help="the burst's runs")
    parser.add_argument("--peer", action="store_true", help="also run plain Celery after each burst (bench/burst.py)")
    parser.add_argument("--load-only", action="store_true", help="load the history, run no burst")
    parser.add_argument("--api-only", action="store_true",
                        help="measure the API over the loaded history, run no burst (sizes above 0)")
    parser.add_argument("--wave-only", action="store_true", help="run the 10,000-cron wave alone at each size")
    parser.add_argument("--requests", type=int, default=2000, help="API requests per endpoint and size")
    parser.add_argument("--pause", type=float, default=300,
                        help="seconds between bursts (the file store's deletes slow the next five minutes)")
    args = parser.parse_args()
    django_on(DATABASE, keep=True)
    results: dict[int, dict] = {}
    for n, rows in enumerate(sorted(set(args.rows))):
        if rows:
            load(rows)
            sizes = table_bytes()
            print(f"history {rows:,}: " + ", ".join(f"{t} {b / rows:,.0f} B/run" for t, b in sizes.items())
                  + f"; {sum(sizes.values()) / rows:,.0f} B/run in all", flush=True)
        if args.load_only:
            continue
        if args.api_only:
            api_p95 = api(DATABASE, "history-000", args, analyze=False)
            print(f"history {rows:,}: API p95 GET /runs/{{id}} {api_p95['run']:.1f} ms, schedule history page"
                  f" {api_p95['schedule_page']:.1f} ms, runs page {api_p95['runs_page']:.1f} ms", flush=True)
            continue
        if args.wave_only:
            results[rows] = {"wave": wave(DATABASE if rows else "scheduler_peer", keep=bool(rows))}
            continue
        if n:
            time.sleep(args.pause)
        database = DATABASE if rows else "scheduler_burst"
        results[rows] = burst(database, keep=bool(rows), args=args)
        # The API over the history's first tenant; on the empty database, over the burst's.
        results[rows]["api"] = api(database, "history-000" if rows else "burst-%", args, analyze=not rows)
        results[rows]["wave"] = wave(DATABASE if rows else "scheduler_peer", keep=bool(rows))
    empty = results.get(0)
    for rows, figures in results.items():
        if args.wave_only:
            print(f"history {rows:,}: {wave_line(figures, empty)}")
            continue
        line = f"history {rows:,}: burst {figures['runs_per_s']:,.0f} runs/s"
        if empty and rows:
            line += f" (empty {empty['runs_per_s']:,.0f}, ratio {figures['runs_per_s'] / empty['runs_per_s']:.2f})"
        line += f", p99 {figures['p99']:.1f} s, PostgreSQL {figures['postgres_cpu_ms']:.2f} ms/run"
        line += f" (all postgres processes {figures['postgres_all_cpu_ms']:.2f})"
        if "ratio" in figures:
            line += f", plain Celery ratio {figures['ratio']:.2f}"
        api_p95 = figures["api"]
        line += (f"; API p95 GET /runs/{{id}} {api_p95['run']:.1f} ms, schedule history page"
                 f" {api_p95['schedule_page']:.1f} ms, runs page {api_p95['runs_page']:.1f} ms")
        print(f"{line}; {wave_line(figures, empty)}")


def wave_line(figures: dict, empty: dict | None) -> str:
    """The wave's p99 (due instant to the hint on the broker), against the empty database's,
    and what it wrote: a new run placed on a page of history costs that page's read and image."""
    line = f"wave p99 {figures['wave']['p99']:.2f} s"
    if empty and figures is not empty:
        line += f" (empty {empty['wave']['p99']:.2f}, ratio {figures['wave']['p99'] / empty['wave']['p99']:.2f})"
    from peer_beat import writes_text

    wave = figures["wave"]
    return line + f", {wave['published']:,} of {wave['n']:,} published; per run {writes_text(wave['writes'], wave['n'])}"


if __name__ == "__main__":
    main()
