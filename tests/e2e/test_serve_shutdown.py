"""`make run`'s supervisor stops everything it started, even with browsers holding keep-alive connections."""

import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
    """``count`` connections each kept open after a served request. A web process builds
    the schema on its first request: with the suite running beside it on two cores that took
    more than 10 s once, so a request may take a minute (what is timed is the stop)."""
    connections = []
    for _ in range(count):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/api/schema/", headers={"Connection": "keep-alive"})
        response = connection.getresponse()
        response.read()
        assert response.status == 200 and not response.will_close
        connections.append(connection)
    return connections


def start_serving(directory: Path) -> tuple[Processes, subprocess.Popen, int]:
    """`manage.py serve` on a free port, embedded (SQLite under ``directory``/var), listening."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "OBJECT_STORE_URL"}}
    env |= {"SCHEDULER_VAR_DIR": str(directory / "var"), "PYTHONUNBUFFERED": "1"}
    subprocess.run([PYTHON, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
    port = free_port()
    processes = Processes(directory, env)
    supervisor = processes.manage("serve", "serve", "--port", str(port))
    try:
        wait_until(lambda: not port_is_free(port), timeout=60, message="the web process to listen")
    except BaseException:
        processes.stop_all()
        raise
    return processes, supervisor, port


def start_side_by_side(*directories: Path) -> list[tuple[Processes, subprocess.Popen, int]]:
    """``start_serving`` in each directory at once (each migrates its own SQLite, then
    serves): the set-ups overlap instead of following one another. If one fails, those
    that started are stopped."""
    with ThreadPoolExecutor(len(directories)) as pool:
        futures = [pool.submit(start_serving, directory) for directory in directories]
    started = [future.result() for future in futures if future.exception() is None]
    if len(started) < len(futures):
        for processes, _, _ in started:
            processes.stop_all()
        raise next(future.exception() for future in futures if future.exception() is not None)
    return started


@pytest.fixture
def serving(tmp_path):
    processes, supervisor, port = start_serving(tmp_path)
    try:
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


def test_serve__banner_names_the_api_the_console_and_how_to_make_its_staff_user(serving):
    processes, _, port = serving
    wait_until(lambda: "createsuperuser" in processes.log("serve"), timeout=10, message="the banner")
    banner = processes.log("serve")
    assert f"serving on http://127.0.0.1:{port}/ with web, " in banner
    python = Path(PYTHON).relative_to(ROOT) if Path(PYTHON).is_relative_to(ROOT) else PYTHON
    assert (f"console on http://127.0.0.1:{port}/console/ for staff users; create one with "
            f"`{python} manage.py createsuperuser`") in banner


def test_serve__two_instances_each_keep_their_own_gunicorn_control_socket(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first, second = start_side_by_side(tmp_path / "a", tmp_path / "b")
    sockets = [tmp_path / "a" / "var" / "gunicorn.ctl", tmp_path / "b" / "var" / "gunicorn.ctl"]
    try:
        wait_until(lambda: all(socket_path.is_socket() for socket_path in sockets), timeout=10,
                   message="both control sockets")
        first[0].stop_all()
        assert not sockets[0].exists()
        assert sockets[1].is_socket()  # the other instance's, untouched
    finally:
        first[0].stop_all()
        second[0].stop_all()
