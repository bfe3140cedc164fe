"""Fixtures of the chaos suite: a Redis server of its own, child processes, one system per test."""

import os
import shutil

import pytest
import redis

from tests.child_env import redis_mode
from tests.e2e.processes import Processes
from tests.servers import RedisServer, moto_server  # noqa: F401

CHAOS_REDIS_DB = 13


@pytest.fixture(scope="session")
def chaos_redis(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("the chaos suite starts its own redis-server (install redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis") / "redis.log", db=CHAOS_REDIS_DB)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_server(chaos_redis):
    """The suite's Redis, running (a previous scenario may have killed it) and empty."""
    if chaos_redis.process.poll() is not None:
        chaos_redis.start()
    client = redis.Redis.from_url(chaos_redis.url)
    client.flushdb()
    yield chaos_redis
    if chaos_redis.process.poll() is None:
        client.flushdb()


@pytest.fixture
def processes(tmp_path, request):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = dict(os.environ, LOG_LEVEL="INFO", PYTHONUNBUFFERED="1", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    env.pop("SCHEDULER_FAILPOINTS", None)
    procs = Processes(tmp_path, env=env)
    procs.metrics_dir = metrics_dir
    yield procs
    report = getattr(request.node, "rep_call", None)
    failed = report is not None and report.failed
    if failed:
        print_database_sessions()
    procs.kill_all()  # SIGSTOPped children too
    if failed:
        for path in sorted(tmp_path.glob("*.log")):
            text = path.read_text(errors="replace")
            if text:
                print(f"----- {path.name} (tail) -----\n{text[-3000:]}")


def print_database_sessions() -> None:
    """Who holds what in the test database: the first thing to know when a scenario hangs."""
    from django.db import DatabaseError, connection

    print("----- database sessions -----")
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, state, now() - xact_start, wait_event_type, left(query, 160) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY xact_start"
            )
            for row in cursor.fetchall():
                print(*row)
    except DatabaseError as exc:  # a drill may have stopped that server on purpose
        print(f"(unreachable: {exc})")


@pytest.fixture
def chaos(processes, redis_server, moto_server, settings):  # noqa: F811
    """The environment shared by this process and its children: one database, broker, bucket."""
    from tests.chaos.system import ChaosSystem

    with redis_mode(processes, settings, redis_url=redis_server.url, s3_endpoint=moto_server, bucket_prefix="chaos"):
        yield ChaosSystem(processes, redis_server)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
