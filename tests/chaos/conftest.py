"""Fixtures of the chaos suite: a Redis server of its own, child processes, one system per test."""

import os
import shutil
import signal
import subprocess
import time

import pytest
import redis

from tests.child_env import redis_mode
from tests.e2e.processes import Processes
from tests.servers import free_port, moto_server  # noqa: F401

CHAOS_REDIS_DB = 13


class RedisServer:
    """A redis-server this suite owns, so one scenario can restart it; never the shared one."""

    def __init__(self, log_path):
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{CHAOS_REDIS_DB}"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start")
                time.sleep(0.05)

    def kill(self) -> None:
        """Lose everything it held, as a crash does: no save, no graceful close."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def restart(self, down_seconds: float = 0.0) -> None:
        self.kill()
        time.sleep(down_seconds)
        self.start()


@pytest.fixture(scope="session")
def chaos_redis(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("the chaos suite starts its own redis-server (install redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis") / "redis.log")
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
    for name in list(procs.children):  # a stopped child cannot act on SIGTERM
        try:
            procs.signal(name, signal.SIGCONT)
        except ProcessLookupError:
            pass
    procs.stop_all()
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
