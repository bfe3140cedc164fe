"""Real processes for end-to-end and chaos tests: started, watched and always stopped."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def wait_until(predicate, *, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


class Processes:
    """A set of named child processes, each in its own process group with a log file."""

    def __init__(self, log_dir: Path, env: dict):
        self.log_dir = log_dir
        self.env = env
        self.children: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str], **extra_env) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")
        child = subprocess.Popen(
            argv, cwd=ROOT, env={**self.env, **extra_env}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.children[name] = child
        return child

    def manage(self, name: str, *args: str, **extra_env) -> subprocess.Popen:
        return self.start(name, [PYTHON, "manage.py", *args], **extra_env)

    def celery_worker(self, name: str, queues: str, concurrency: int = 2, **extra_env) -> subprocess.Popen:
        return self.start(
            name,
            [PYTHON, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", queues, "-c", str(concurrency),
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "info"],
            **extra_env,
        )

    def gunicorn(self, name: str, port: int, *, workers: int, threads: int, **extra_env) -> subprocess.Popen:
        """The web process as production runs it (scheduler_project.wsgi, gthread workers), without
        a control socket: gunicorn's default one is shared by every gunicorn of the user."""
        return self.start(
            name,
            [PYTHON, "-m", "gunicorn", "scheduler_project.wsgi", "--bind", f"127.0.0.1:{port}",
             "--workers", str(workers), "--threads", str(threads), "--graceful-timeout", "5", "--no-control-socket"],
            **extra_env,
        )

    def signal(self, name: str, sig) -> None:
        os.killpg(self.children[name].pid, sig)

    def stop(self, name: str, timeout: float = 10) -> None:
        self._stop([name], timeout)

    def stop_all(self, timeout: float = 10) -> None:
        """Stop every child at once: all are asked to stop (SIGTERM to the group) before
        any is waited for, so shutting down costs the slowest child, not their sum."""
        self._stop(list(self.children), timeout)

    def kill_all(self) -> None:
        """SIGKILL every child's group at once (a graceful stop of a Celery worker costs 1-2 s):
        the chaos suite's teardown, whose transactional tests flush whatever a killed worker
        left behind. A worker killed so does not withdraw its slot report (runs.WorkerSlots),
        so a test that does not flush the database stops its workers with ``stop_all``."""
        for child in self.children.values():
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for child in self.children.values():
            child.wait()
        self.children.clear()

    def _stop(self, names: list[str], timeout: float) -> None:
        children = [self.children.pop(name) for name in names]
        for child in children:
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for child in children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                child.wait()

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""
