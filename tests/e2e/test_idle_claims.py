"""Hints are only hints: a real Celery worker whose queue gives it nothing claims the queued
runs of its resource classes from the authority (workers/idle_claims.py), with the broker up
and no hint ever published, and with the broker down. Every run executes once, under fence 1,
with nothing lost or doubled (tests/chaos/invariants.py)."""

import socket
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from runs.authority import run_once
from runs.models import Attempt, Outbox, Run, RunState
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from tests.chaos.invariants import check_invariants
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("file_objects")]

IDLE_SECONDS = 1.0
RUNS = 8


@pytest.fixture
def worker(processes, tenant):
    """Start a worker with ``start(redis_url, concurrency)`` on this test's database and object store."""

    def start(redis_url: str, concurrency: int = 2, name: str = "worker", idle_seconds: float = IDLE_SECONDS):
        processes.env.update(
            DATABASE_URL=f"{database_url_of_test_db()}?application_name={name}", REDIS_URL=redis_url,
            OBJECT_STORE_URL=settings.OBJECT_STORE_URL, IDLE_CLAIM_SECONDS=str(idle_seconds),
        )
        processes.celery_worker(name, "short", concurrency=concurrency)
        wait_until(lambda: "ready" in processes.log(name), timeout=60, message="the worker to start")

    return start


def queued_runs(tenant, n: int, seconds: float = 0.2) -> tuple[str, list[Run]]:
    """``n`` run-once requests: queued runs whose outbox rows no relay publishes."""
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": seconds}, "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 1 1 *"}}))
    return schedule.id, [run_once(tenant=tenant, schedule_id=schedule.id)[0] for _ in range(n)]


def assert_executed_once_each(schedule_id: str, runs: list[Run], worker_pid: int) -> None:
    """Once each, under fence 1, by the worker (labelled as its hint tasks label theirs)."""
    ids = [run.id for run in runs]
    assert Run.objects.filter(id__in=ids, state=RunState.SUCCEEDED).count() == len(ids)
    attempts = list(Attempt.objects.filter(run_id__in=ids).values_list("run_id", "fence", "worker_label"))
    assert sorted(run_id for run_id, _, _ in attempts) == sorted(ids)  # one attempt each
    assert {(fence, label) for _, fence, label in attempts} == {(1, f"celery:{socket.gethostname()}:{worker_pid}")}
    assert not Outbox.objects.filter(run_id__in=ids, processed_at__isnull=True).exists()
    check_invariants(schedule_ids=[schedule_id], run_ids=ids).assert_ok()


def test_queue_gives_nothing__the_worker_executes_queued_runs_from_the_authority(worker, redis_url, processes, tenant):
    """No relay runs: not one hint is ever published, as if every hint had been lost."""
    worker(redis_url)
    schedule_id, runs = queued_runs(tenant, RUNS)
    started = time.monotonic()
    wait_until(lambda: Run.objects.filter(id__in=[r.id for r in runs], state=RunState.SUCCEEDED).count() == RUNS,
               timeout=15, interval=0.1, message="the queued runs to be executed without hints")
    took = time.monotonic() - started
    # Quiet for IDLE_SECONDS, then 2 processes x 4 runs of 0.2 s; well within a few seconds.
    assert took < IDLE_SECONDS + 4, took
    assert not Outbox.objects.filter(run_id__in=[r.id for r in runs], published_at__isnull=False).exists()
    assert_executed_once_each(schedule_id, runs, processes.children["worker"].pid)


def test_broker_down__the_worker_keeps_executing_from_the_authority(worker, private_redis, processes, tenant):
    worker(private_redis.url)
    private_redis.kill()  # and it stays down while the runs are created and executed
    schedule_id, runs = queued_runs(tenant, RUNS)
    wait_until(lambda: Run.objects.filter(id__in=[r.id for r in runs], state=RunState.SUCCEEDED).count() == RUNS,
               timeout=15, interval=0.1, message="the queued runs to be executed with the broker down")
    assert processes.children["worker"].poll() is None
    assert_executed_once_each(schedule_id, runs, processes.children["worker"].pid)
    private_redis.start()
    wait_until(lambda: "Connected to" in processes.log("worker").rpartition("Connection to broker lost")[2],
               timeout=15, message="the worker back on the broker")


def database_counters() -> tuple[int, int]:
    """(sessions opened on the test database, scans of the run table) so far."""
    with psycopg.connect(database_url_of_test_db(), autocommit=True) as admin:
        return admin.execute(
            "SELECT sessions, (SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables"
            " WHERE relname = 'runs_run') FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()


def test_nothing_queued__a_worker_reads_the_run_table_once_per_interval_whatever_its_concurrency(
    worker, redis_url, processes
):
    """Eight free processes share one question per IDLE_SECONDS, asked by the same process
    on the connection it keeps: no connection is opened while nothing is queued."""
    connection.close()  # this process's statistics are flushed now, not during the measurement
    worker(redis_url, concurrency=8)
    time.sleep(2 * IDLE_SECONDS)
    (sessions, scans), started = database_counters(), time.monotonic()
    time.sleep(10)
    (sessions_after, scans_after), seconds = database_counters(), time.monotonic() - started
    opened, per_second = sessions_after - sessions - 1, (scans_after - scans) / seconds  # less this test's own
    print(f"idle worker (-c 8): {per_second:.2f} reads of the run table/s, "
          f"{opened} connections opened in {seconds:.0f} s")
    assert per_second <= 1.2 / IDLE_SECONDS and opened == 0, (per_second, opened)
    assert "idle claims failed" not in processes.log("worker")



def worker_connections() -> list[str]:
    """The last statement of each of the worker's server connections (its application_name)."""
    with psycopg.connect(database_url_of_test_db(), autocommit=True) as admin:
        rows = admin.execute("SELECT query FROM pg_stat_activity"
                             " WHERE datname = current_database() AND application_name = 'worker'")
        return [row[0] for row in rows]


def test_a_task_keeps_its_connection__the_idle_thread_closes_it_as_it_takes_the_process(worker, redis_url, processes,
                                                                                        tenant):
    """Tasks keep their connection from one to the next (scheduler_project/celery.py); once the
    queues are quiet, the process's thread asks the authority on a connection of its own and
    closes the task's: the pool process still holds one connection, not two. (The worker's
    main process holds one more, its slot reporter's.)"""
    idle_seconds = 3.0
    processes.manage("relay", "relay", DATABASE_URL=f"{database_url_of_test_db()}?application_name=relay",
                     REDIS_URL=redis_url)
    _, runs = queued_runs(tenant, 1, seconds=0)
    # The hint waits in the queue, and the worker takes it as it starts, well before its thread may claim.
    wait_until(lambda: Outbox.objects.filter(run_id=runs[0].id, published_at__isnull=False).exists(), timeout=30,
               interval=0.05, message="the run's hint to be published")
    worker(redis_url, concurrency=1, idle_seconds=idle_seconds)
    wait_until(lambda: Run.objects.filter(id=runs[0].id, state=RunState.SUCCEEDED).exists(), timeout=30,
               interval=0.05, message="the hinted run to succeed")
    after_the_task = worker_connections()
    wait_until(lambda: "scheduler.execute" in processes.log("worker"), timeout=10, message="the task's log line")
    assert "'outcome': 'executed'" in processes.log("worker")  # the task ran it, not the thread
    time.sleep(idle_seconds + 2)  # quiet: the thread has asked the authority
    while_quiet = worker_connections()
    print(f"worker connections after the task: {after_the_task}; while quiet: {while_quiet}")
    assert len(after_the_task) == 2
    assert len(while_quiet) == 2 and sum("FROM runs_run" in query for query in while_quiet) == 1
