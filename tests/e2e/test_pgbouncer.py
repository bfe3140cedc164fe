"""The Redis-mode system behind PgBouncer in transaction pooling mode (Debian's package, a
private process on a free port): web, scanner, relay, sweeper and a Celery worker reach
PostgreSQL only through it, more clients than server sessions, and runs complete with their
results. Consecutive transactions of one client land in different server sessions, so
anything kept in a session (prepared statements, SET, LISTEN, advisory locks) would break."""

import hashlib
import json
import urllib.request

import psycopg
import pytest
from django.db import connection
from django.db.utils import ConnectionHandler, OperationalError

from runs.models import Run, RunState
from kernel.connections import configure_postgresql
from kernel.database_url import parse_database_url
from tests.child_env import database_url_of_test_db, redis_mode
from tests.e2e.processes import wait_until
from tests.e2e.test_redis_mode import make_due_now
from tests.factories import make_tenant
from tests.servers import PgBouncer, api_request, free_port, pgbouncer_in_front_of, wait_for_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVER_SESSIONS = 3  # PgBouncer's default_pool_size: server sessions for the test database
MANUAL_RUNS = 12


@pytest.fixture
def pgbouncer(tmp_path):
    log = tmp_path / "pgbouncer.log"
    with pgbouncer_in_front_of(database_url_of_test_db(), log, pool_size=SERVER_SESSIONS) as bouncer:
        yield bouncer


def url_through(bouncer: PgBouncer) -> str:
    return bouncer.url(database_url_of_test_db())


@pytest.fixture
def system(processes, redis_url, moto_server, settings, pgbouncer):
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="pgbouncer"):
        processes.env.update({
            "DATABASE_URL": url_through(pgbouncer), "DATABASE_POOLER": "pgbouncer", "API_RATE_LIMIT_PER_SECOND": "0",
        })
        yield processes


def api(port: int, token: str, method: str, path: str, body=None, *, status: int = 200):
    """The JSON answer of the gunicorn under test, which must answer `status`."""
    answer = api_request(port, token, method, path, None if body is None else json.dumps(body))
    assert answer[0] == status, answer
    return json.loads(answer[2])


def test_pgbouncer__redis_mode_system_completes_runs_with_results_through_transaction_pooling(system, pgbouncer):
    tenant = make_tenant("acme")
    port = free_port()
    system.gunicorn("web", port, workers=1, threads=4, DATABASE_POOL_MAX_SIZE="2")
    wait_for_port(port, system.children["web"])
    schedule_id = api(port, tenant.secret, "POST", "/api/v1/schedules", {
        "name": "sales", "jobType": "report.sales", "params": {"region": "eu"}, "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
    }, status=201)["scheduleId"]
    make_due_now(schedule_id)
    for _ in range(MANUAL_RUNS):
        api(port, tenant.secret, "POST", f"/api/v1/schedules/{schedule_id}/runs", {}, status=201)
    for loop in ("scan", "relay", "sweep"):
        system.manage(loop, loop)
    system.celery_worker("worker", "short", concurrency=3)

    def every_run_succeeded():  # polled over HTTP: the web's pooled connections repeat their statements
        runs = api(port, tenant.secret, "GET", f"/api/v1/schedules/{schedule_id}/runs?limit=100")["results"]
        return runs if len(runs) == MANUAL_RUNS + 1 and all(r["state"] == "succeeded" for r in runs) else None

    runs = wait_until(every_run_succeeded, timeout=120, interval=0.5, message="every run to succeed")
    assert Run.objects.filter(schedule_id=schedule_id, state=RunState.SUCCEEDED).count() == MANUAL_RUNS + 1
    for run in runs:
        link = api(port, tenant.secret, "GET", f"/api/v1/runs/{run['runId']}/result")
        with urllib.request.urlopen(link["url"], timeout=10) as response:
            assert "sha256:" + hashlib.sha256(response.read()).hexdigest() == link["checksum"]

    # Everything went through PgBouncer: more clients than server sessions, many transactions.
    database = connection.settings_dict["NAME"]
    pool = next(p for p in pgbouncer.show("POOLS") if p["database"] == database)
    clients = [c for c in pgbouncer.show("CLIENTS") if c["database"] == database]
    stats = next(s for s in pgbouncer.show("STATS") if s["database"] == database)
    servers = sum(pool[k] for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
    print(f"{len(clients)} clients over {servers} server sessions, {stats['total_xact_count']} transactions")
    assert len(clients) > SERVER_SESSIONS >= servers
    assert stats["total_xact_count"] > 200
    for name in ("web", "scan", "relay", "sweep", "worker"):
        assert system.children[name].poll() is None, f"{name} exited:\n{system.log(name)[-3000:]}"
        assert "prepared statement" not in system.log(name)


def scheduler_connection(url: str, *, pooler: str, **options):
    """A Django connection to `url` configured the way the settings configure DATABASE_URL,
    starting from `options` (as a URL's query parameters would set them)."""
    database = parse_database_url(url, conn_max_age=60)
    database.setdefault("OPTIONS", {}).update(options)
    configure_postgresql(database, pooler=pooler, idle_in_transaction_seconds=10)
    return ConnectionHandler({"default": database})["default"]  # a handler of its own, not the test's


def alternate_server_sessions(execute, hog, times: int = 12) -> None:
    """Run `execute` `times` times, alternating between two server sessions. PgBouncer hands
    out the session released last: every other time `hog`, in a transaction, holds that one."""
    for i in range(times):
        if i % 2:
            hog.execute("SELECT 1")
        execute(i)
        hog.rollback()


# Django binds parameters client-side by default (nothing to prepare); with server-side binding
# psycopg would prepare after 5 executions, unless prepare_threshold is None, which the pooler
# setting enforces even over an explicit value.
@pytest.mark.parametrize("server_side_binding", [False, True])
def test_pgbouncer__scheduler_connections_prepare_nothing_where_psycopgs_default_breaks(pgbouncer, server_side_binding):
    url = url_through(pgbouncer)
    with psycopg.connect(url) as hog:
        scheduler = scheduler_connection(url, pooler="pgbouncer", server_side_binding=server_side_binding,
                                         prepare_threshold=5)
        with scheduler.cursor() as cursor:
            alternate_server_sessions(lambda i: cursor.execute("SELECT %s::int", [i]), hog)
            assert cursor.fetchone() == (11,)
        scheduler.close()

        # psycopg's own default prepares a statement after 5 executions: in the next session it is gone.
        broken = pytest.raises(psycopg.errors.InvalidSqlStatementName)
        with psycopg.connect(url, autocommit=True) as default_client, broken:
            alternate_server_sessions(lambda i: default_client.execute("SELECT %s::int", [i]), hog)


def test_pgbouncer__direct_mode_options_are_refused_so_the_pooler_setting_is_needed(pgbouncer):
    direct_config = scheduler_connection(url_through(pgbouncer), pooler="")
    with pytest.raises(OperationalError, match="unsupported startup parameter: options"):
        direct_config.ensure_connection()
