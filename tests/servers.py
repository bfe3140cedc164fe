"""Real server processes for tests: S3 is exercised against a moto_server subprocess, never an in-process mock.
Also the few things every test that starts a server needs: a free port, waiting for it, stopping it."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
