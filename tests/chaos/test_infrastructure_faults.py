"""The broker and the database go away under a burst: hints are rebuilt from the outbox,
processes reconnect, and no run is lost or doubled."""

import time

import pytest
import redis
from django.db import connection

from runs.models import Outbox, OutboxKind, RunState
from tests.e2e.processes import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BURST = 240
PROCESSES = ("scan-1", "relay-1", "sweep", "worker-1", "worker-2")
# Lines where a process met its terminated session: loops, heartbeats, completions, Celery tasks.
RECONNECTED = (r"database error, reconnecting|failed, retrying next beat|undeliverable"
               r"|raised unexpected: (?:Operational|Interface)Error")


def test_chaos__redis_restarted_mid_burst__outbox_and_sweeper_recover_every_run(chaos):
    load = chaos.burst(BURST)
    chaos.start(workers=2, concurrency=4)
    chaos.wait_terminal(load, BURST // 4)
    broker = redis.Redis.from_url(chaos.redis.url)
    hints_lost = broker.llen("short")

    chaos.redis.restart(down_seconds=1.0)  # no persistence: every queued and reserved hint is gone
    chaos.settle(load)

    report = chaos.check(load)
    assert report.by_state == {RunState.SUCCEEDED: BURST}
    assert all(chaos.alive(name) for name in PROCESSES)
    republished = sum(int(n) for n in chaos.find_in_logs(r"republishing (\d+) hints", "relay"))
    assert republished > 0
    chaos.figures(
        "Redis restart mid-burst", report, faults=1, hints_lost=hints_lost, republished=republished,
        publish_errors=Outbox.objects.filter(kind=OutboxKind.DISPATCH).exclude(last_error="").count(),
    )


def test_chaos__database_connections_terminated_mid_burst__processes_reconnect(chaos):
    load = chaos.due_schedules(24, every_seconds=10, backlog=2)
    chaos.burst(BURST - 40, load=load)
    chaos.start(workers=2, concurrency=4)
    chaos.wait_terminal(load, BURST // 5)

    terminated = 0
    for _ in range(3):
        terminated += terminate_other_sessions()
        time.sleep(1.5)
    wait_until(lambda: load.terminal() > BURST // 2, timeout=60, message="the burst to go on")
    assert all(chaos.alive(name) for name in PROCESSES)
    chaos.close_window(load)
    chaos.settle(load)

    report = chaos.check(load)
    chaos.figures(
        "pg_terminate_backend mid-burst", report, faults=3, terminated_sessions=terminated,
        reconnects=sum(chaos.count_in_logs(RECONNECTED, prefix) for prefix in ("scan", "relay", "sweep", "worker")),
    )


def terminate_other_sessions() -> int:
    """Terminate every session of the test database except this one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]
