"""`make run`'s supervisor stops everything it started, even with browsers holding keep-alive connections."""

import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.processes import PYTHON, ROOT, Processes, wait_until
from tests.servers import free_port

pytestmark = pytest.mark.slow
PORT_FREE_WITHIN_SECONDS = 10


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def port_is_free(port: int) -> bool:
    # Bound the way the next gunicorn binds (SO_REUSEADDR), so TIME_WAIT leftovers do not count.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def keep_alive_connections(port: int, count: int) -> list[http.client.HTTPConnection]:
    connections = []
    for _ in range(count):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/api/schema/", headers={"Connection": "keep-alive"})
        response = connection.getresponse()
        response.read()
        assert response.status == 200 and not response.will_close
        connections.append(connection)
    return connections


@pytest.fixture
def serving(tmp_path):
    """`manage.py serve` on a free port, embedded (SQLite under a temporary var/)."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "OBJECT_STORE_URL"}}
    env |= {"SCHEDULER_VAR_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1"}
    subprocess.run([PYTHON, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
    port = free_port()
    processes = Processes(tmp_path, env)
    supervisor = processes.manage("serve", "serve", "--port", str(port))
    try:
        wait_until(lambda: not port_is_free(port), timeout=60, message="the web process to listen")
        yield processes, supervisor, port
    finally:
        processes.stop_all()


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_serve__stop_frees_the_port_and_leaves_no_child(serving, stop):
    processes, supervisor, port = serving
    connections = keep_alive_connections(port, count=4)
    started = descendants(supervisor.pid)
    browsing = threading.Event()

    def browse(connection):
        # A browser tab that keeps using its connection while the server stops.
        while not browsing.is_set():
            try:
                connection.request("GET", "/api/docs/")
                connection.getresponse().read()
            except (OSError, http.client.HTTPException):
                return

    threads = [threading.Thread(target=browse, args=(c,), daemon=True) for c in connections]
    for thread in threads:
        thread.start()
    assert len(started) >= 8, "web (master and workers), scan, sweep, effects, cleanup, dispatch"

    if stop == "ctrl-c":
        os.killpg(supervisor.pid, signal.SIGINT)  # the terminal signals the foreground group
    else:
        supervisor.send_signal(signal.SIGTERM)  # `kill` of the supervisor alone
    stop_sent = time.monotonic()
    wait_until(lambda: port_is_free(port), timeout=PORT_FREE_WITHIN_SECONDS, message="port to be free")
    supervisor.wait(timeout=max(1, PORT_FREE_WITHIN_SECONDS - (time.monotonic() - stop_sent)))

    assert {pid for pid in started if alive(pid)} == set()
    assert "stopped every process this command started" in processes.log("serve")
    browsing.set()
    for connection in connections:
        connection.close()
