"""Connection budgets on PostgreSQL, counted in pg_stat_activity. The web process (a real
gunicorn): many concurrent quick requests never hold more connections than its pool allows and
are never answered 500, and a request that finds no pooled connection free in time is answered
503 with Retry-After. Every other process kind stays within its documented budget."""

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from runs.models import Outbox, Run, RunState
from schedules.models import ApiToken
from tests.child_env import database_url_of_test_db, redis_mode
from tests.e2e.processes import PYTHON, wait_until
from tests.factories import api_client
from tests.servers import api_request, free_port, wait_for_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PREVIEW = json.dumps({"recurrence": {"kind": "cron", "cron": "*/5 * * * *"}, "count": 3})


def start_web(processes, name: str, *, workers: int, threads: int, pool: int, **extra_env) -> int:
    """gunicorn on the test database; its connections carry `name` as application_name."""
    port = free_port()
    processes.gunicorn(
        name, port, workers=workers, threads=threads,
        DATABASE_URL=f"{database_url_of_test_db()}?application_name={name}",
        DATABASE_POOL_MAX_SIZE=str(pool), API_RATE_LIMIT_PER_SECOND="0", **extra_env,
    )
    wait_for_port(port, processes.children[name])
    return port


def connections_of(application_name: str, *, waiting_on_a_lock: bool = False) -> int:
    with psycopg.connect(database_url_of_test_db(), autocommit=True) as admin:
        return admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s"
            " AND (NOT %s OR wait_event_type = 'Lock')", [application_name, waiting_on_a_lock]
        ).fetchone()[0]


class ConnectionSampler(threading.Thread):
    """Counts, every few milliseconds until stopped, the server connections of each
    application_name; keeps the highest count seen per name."""

    def __init__(self):
        super().__init__(daemon=True)
        self.highest: Counter = Counter()
        self.samples = 0
        self.done = threading.Event()

    def run(self):
        with psycopg.connect(database_url_of_test_db(), autocommit=True) as admin:
            while not self.done.wait(0.005):
                rows = admin.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " GROUP BY application_name"
                ).fetchall()
                for name, count in rows:
                    self.highest[name] = max(self.highest[name], count)
                self.samples += 1

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join(timeout=10)


def test_web__many_concurrent_quick_requests__stay_within_the_pool_budget_and_never_500(processes, tenant):
    workers, threads, pool = 2, 8, 2
    port = start_web(processes, "budget-web", workers=workers, threads=threads, pool=pool)
    calls = [("GET", "/api/v1/schedules", None), ("POST", "/api/v1/schedules/preview", PREVIEW)]
    with ConnectionSampler() as sampler, ThreadPoolExecutor(max_workers=32) as clients:
        answers = clients.map(lambda i: api_request(port, tenant.secret, *calls[i % 2]), range(800))
        statuses = Counter(status for status, _, _ in answers)
    highest = sampler.highest["budget-web"]
    print(f"statuses {dict(statuses)}, highest {highest} connections in {sampler.samples} samples")
    assert statuses == {200: 800}
    # Both workers' pools were seen (the sampler sees the server), and never more than they allow.
    assert workers <= highest <= workers * pool
    assert sampler.samples > 20


def test_web__no_pooled_connection_free_in_time__503_with_retry_after(processes, tenant):
    port = start_web(processes, "pool-timeout", workers=1, threads=4, pool=1, DATABASE_POOL_TIMEOUT_SECONDS="0.5")
    assert api_request(port, tenant.secret, "GET", "/api/v1/schedules")[0] == 200
    with psycopg.connect(database_url_of_test_db()) as locker, ThreadPoolExecutor(max_workers=1) as background:
        # The first request takes the pool's only connection and waits on the token table.
        locker.execute(f'LOCK TABLE "{ApiToken._meta.db_table}" IN ACCESS EXCLUSIVE MODE')
        holding = background.submit(api_request, port, tenant.secret, "GET", "/api/v1/schedules")
        wait_until(lambda: connections_of("pool-timeout", waiting_on_a_lock=True) == 1, timeout=10,
                   message="the first request to hold the connection")
        status, headers, body = api_request(port, tenant.secret, "GET", "/api/v1/schedules")
        locker.rollback()
        assert holding.result(timeout=10)[0] == 200
    assert status == 503, body
    assert headers["Retry-After"] == "1"
    assert json.loads(body)["error"]["code"] == "unavailable"
    # The pool is whole again: the next request is served.
    assert api_request(port, tenant.secret, "GET", "/api/v1/schedules")[0] == 200
    assert connections_of("pool-timeout") == 1


# docs/operations.md, "Connection budget": the connections one process of each kind holds at most.
CELERY_CONCURRENCY = 3
BUDGET = {"scan": 1, "relay": 1, "sweep": 1, "effects": 1, "cleanup": 1, "beat": 1, "worker": 2 * CELERY_CONCURRENCY + 1}


def test_every_process_kind__stays_within_its_documented_budget_while_runs_complete(
    processes, redis_url, moto_server, settings, tenant
):
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="budget"):
        client = api_client(tenant)
        schedule_id = client.post("/api/v1/schedules", {
            "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0.3}, "overlapPolicy": "allow",
            "recurrence": {"kind": "cron", "cron": "0 9 * * *"},
        }).json()["scheduleId"]
        run_ids = [client.post(f"/api/v1/schedules/{schedule_id}/runs", {}).json()["runId"] for _ in range(20)]
        named = {kind: {"DATABASE_URL": f"{processes.env['DATABASE_URL']}?application_name={kind}"} for kind in BUDGET}
        with ConnectionSampler() as sampler:
            for loop in ("scan", "relay", "sweep", "effects", "cleanup"):
                processes.manage(loop, loop, **named[loop])
            processes.start("beat", [PYTHON, "-m", "celery", "-A", "scheduler_project", "beat", "-S",
                                     "django_celery_beat.schedulers:DatabaseScheduler"], **named["beat"])
            processes.celery_worker("worker", "short,housekeeping", concurrency=CELERY_CONCURRENCY, **named["worker"])
            wait_until(lambda: Run.objects.filter(id__in=run_ids, state=RunState.SUCCEEDED).count() == len(run_ids),
                       timeout=120, message="every run to succeed")
    print(f"highest connections per process kind: {dict(sampler.highest)}")
    for kind, budget in BUDGET.items():
        assert 1 <= sampler.highest[kind] <= budget, (kind, sampler.highest[kind])


@pytest.mark.usefixtures("file_objects")
def test_celery_worker__keeps_its_database_connection_from_one_task_to_the_next(processes, redis_url, settings, tenant):
    """Celery's Django fixup closes every connection around every task; a task here gets a
    request's handling instead (scheduler_project/celery.py), so one hint after another costs
    no new PostgreSQL session. Counted by the server: pg_stat_database.sessions."""
    from runs.authority import run_once
    from scheduler_project.http.schedule_requests import schedule_spec
    from schedule_services.lifecycle import schedule_create

    processes.env.update(DATABASE_URL=database_url_of_test_db(), REDIS_URL=redis_url,
                         OBJECT_STORE_URL=settings.OBJECT_STORE_URL, IDLE_CLAIM_SECONDS="0")
    processes.manage("relay", "relay")
    processes.celery_worker("worker", "short", concurrency=1)
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0}, "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 1 1 *"}}))

    def one_run_through_its_own_hint():
        run, _ = run_once(tenant=tenant, schedule_id=schedule.id)
        wait_until(lambda: Run.objects.filter(id=run.id, state=RunState.SUCCEEDED).exists(), timeout=60,
                   interval=0.05, message="the run to succeed")

    with psycopg.connect(database_url_of_test_db(), autocommit=True) as admin:
        def sessions() -> int:
            return admin.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
                                 ).fetchone()[0]

        one_run_through_its_own_hint()  # the worker is up and its process has connected
        before = sessions()
        for _ in range(12):
            one_run_through_its_own_hint()
        opened = sessions() - before
    print(f"sessions opened for 12 tasks after the first: {opened}")
    assert Outbox.objects.filter(run__schedule_id=schedule.id, published_at__isnull=False).count() == 13
    assert opened <= 1, opened  # at most the lease keeper's, were a beat due (0 s jobs: none)
