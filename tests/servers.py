"""Real server processes for tests: S3 is exercised against a moto_server subprocess, never an in-process mock;
a private Redis or PgBouncer where a test must own one. Also the few things every test that starts a server
needs: a free port, waiting for it, stopping it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
import psycopg
import pytest
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def fresh_postgresql_database(prefix: str):
    """The URL of a new, empty database on the test run's PostgreSQL server, dropped afterwards."""
    server = dj_database_url.parse(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    user = server["USER"] or "postgres"
    auth = user + (f":{server['PASSWORD']}" if server["PASSWORD"] else "")
    address = f"{server['HOST'] or '127.0.0.1'}:{server['PORT'] or 5432}"
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"postgresql://{auth}@{address}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://{auth}@{address}/{name}"
    finally:
        with psycopg.connect(f"postgresql://{auth}@{address}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server process exited early with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def api_request(port: int, token: str, method: str, path: str, body: str | None = None):
    """(status, headers, body bytes) of one request to a server on 127.0.0.1, on a connection
    of its own (as many short-lived clients send them), with a bearer token and a JSON body."""
    import http.client

    client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        client.request(method, path, body=body, headers={"Authorization": f"Bearer {token}",
                                                         "Content-Type": "application/json"})
        response = client.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        client.close()


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_answering(url: str, process: subprocess.Popen, timeout: float = 15.0) -> None:
    # No proxy: a proxy from the environment must not intercept 127.0.0.1.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited early with code {process.returncode}")
        try:
            opener.open(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"moto_server did not answer at {url} within {timeout}s")


def shared_redis_url() -> str:
    """The shared Redis database this test process may flush: TEST_REDIS_URL's (15 by default)
    and, under pytest-xdist, one per worker counting down from it (gw0 that one, gw1 the next
    lower), so parallel workers never empty each other's queues."""
    url = urlsplit(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    database = int(url.path.strip("/") or 0) - int(worker.removeprefix("gw"))
    if database < 0:
        raise RuntimeError(f"TEST_REDIS_URL's database leaves none for pytest-xdist worker {worker}")
    return urlunsplit(url._replace(path=f"/{database}"))


@pytest.fixture
def redis_url():
    """The shared Redis database (shared_redis_url), empty before and after the test."""
    url = shared_redis_url()
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


@pytest.fixture(scope="session")
def moto_server():
    """Endpoint URL of a moto_server process on 127.0.0.1, shared by the session."""
    binary = Path(sys.executable).with_name("moto_server")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        # Dummy credentials for boto3's default chain; moto accepts any.
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.delenv("AWS_PROFILE", raising=False)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_until_answering(f"{endpoint}/moto-api/", process)
            yield endpoint
        finally:
            stop_process(process)


@pytest.fixture
def s3_store(moto_server):
    """An S3 store on a fresh, versioned bucket (with a key prefix, as production may use)."""
    from objectstore import object_store_from_url

    store = object_store_from_url(f"s3://test-{uuid.uuid4().hex[:16]}/objects", endpoint_url=moto_server)
    store.ensure_ready()
    return store


@pytest.fixture
def file_store(tmp_path):
    from objectstore import object_store_from_url

    store = object_store_from_url(f"file://{tmp_path / 'objects'}")
    store.ensure_ready()
    return store


class RedisServer:
    """A redis-server a test owns, so it can restart it; never the shared one."""

    def __init__(self, log_path, db: int = 0):
        self.port = free_port()
        self.db = db
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{self.db}"

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


def pgbouncer_binary() -> str | None:
    """Debian's pgbouncer (bin/ensure-services installs it); /usr/sbin is not on every PATH."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    return "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None


class PgBouncer:
    """A private PgBouncer in transaction pooling mode in front of a PostgreSQL server, on a
    free local port. Clients log in as the server's user without a password (auth_type trust);
    PgBouncer logs in to PostgreSQL the way the test suite does."""

    def __init__(self, log_path: Path, *, server_host: str, server_port: int, user: str, pool_size: int):
        self.port = free_port()
        self.user = user
        self.log_path = log_path
        self.pool_size = pool_size
        self.process: subprocess.Popen | None = None
        # PgBouncer refuses to run as root; as root it drops to the `postgres` account, which
        # must read its files: they live outside pytest's private (0700) temporary directory.
        self.directory = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        self.directory.chmod(0o755)
        (self.directory / "users.txt").write_text(f'"{user}" ""\n')
        (self.directory / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={server_host} port={server_port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.directory / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
            f"admin_users = {user}\nidle_transaction_timeout = 10\n"
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (bin/ensure-services installs Debian's package)")
        run_as = ["-u", "postgres"] if os.geteuid() == 0 else []
        self.process = subprocess.Popen(
            [binary, *run_as, str(self.directory / "pgbouncer.ini")],
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_for_port(self.port, self.process)

    def show(self, what: str) -> list[dict]:
        """A SHOW command of PgBouncer's admin console (simple query protocol only)."""
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(f"postgresql://{self.user}@{self.address}/pgbouncer", autocommit=True,
                             cursor_factory=psycopg.ClientCursor, row_factory=dict_row) as admin:
            return admin.execute(f"SHOW {what}").fetchall()

    def url(self, database_url: str) -> str:
        """`database_url` (postgresql://user@host:port/name) through this PgBouncer."""
        parts = urlsplit(database_url)
        return urlunsplit(parts._replace(netloc=f"{parts.netloc.rpartition('@')[0]}@{self.address}"))

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def fresh_database_url():
    """An empty PostgreSQL database beside the test run's, dropped afterwards."""
    with fresh_postgresql_database("fresh") as url:
        yield url


@contextmanager
def pgbouncer_in_front_of(database_url: str, log_path: Path, *, pool_size: int):
    """A started PgBouncer in front of `database_url`'s server. Without Debian's package the
    test is skipped on a developer's machine and fails in CI, which installs it."""
    if pgbouncer_binary() is None:
        message = "pgbouncer is not installed (bin/ensure-services installs Debian's package)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    parts = urlsplit(database_url)
    bouncer = PgBouncer(log_path, server_host=parts.hostname or "127.0.0.1", server_port=parts.port or 5432,
                        user=parts.username or "postgres", pool_size=pool_size)
    bouncer.start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own on a free port, so restarting it touches nothing else."""
    server = RedisServer(tmp_path / "redis.log")
    server.start()
    yield server
    server.kill()


@contextmanager
def broker(url: str):
    """The Celery app publishes to ``url`` inside the block, over fresh connection pools;
    after it, the app's broker and pools are as before (no pool left on ``url``)."""
    import kombu.pools

    from scheduler_project.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None
    try:
        yield
    finally:
        kombu.pools.reset()  # closes every pool and forgets it: a later pool for `url` is new
        app.conf.broker_url = previous
        app._pool = None
        app.amqp._producer_pool = None
