"""Private PostgreSQL servers for recovery drills: initdb, pg_ctl, pg_basebackup, pg_dump
and pg_restore on free local ports, each in its own directory, so a drill can crash,
restore or promote a database without ever touching the shared server on 5432.

The PostgreSQL tools refuse to run as root: as root they run as the ``postgres`` user
(runuser) on directories that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.e2e.processes import PYTHON, ROOT, wait_until
from tests.servers import free_port

DATABASE = "scheduler"
OWNER = "postgres"
# Drills crash server processes, never the machine: what the OS cache holds survives.
SETTINGS = {"fsync": "off", "full_page_writes": "off", "max_connections": "200", "shared_buffers": "64MB"}


def pg_bin() -> Path:
    """PG_BIN, else the newest /usr/lib/postgresql/*/bin, else the directory of initdb on PATH."""
    found = [os.environ.get("PG_BIN", "")] + sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version)[::-1]
    found.append(os.path.dirname(shutil.which("initdb") or ""))
    for candidate in found:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    pytest.skip("recovery drills start private PostgreSQL servers (install postgresql: initdb, pg_ctl)")


def _version(path: str) -> int:
    name = Path(path).parent.name
    return int(name) if name.isdigit() else 0


class Cluster:
    """One private server: data directory ``root/name``, port, log, and its tools."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = root, name
        self.data = root / name
        self.port = free_port()
        self.log = root / f"{name}.log"

    # ------------------------------------------------------------------ addresses

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://{OWNER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = DATABASE, **kwargs) -> psycopg.Connection:
        return psycopg.connect(self.url(database), autocommit=True, connect_timeout=5, **kwargs)

    def query(self, sql: str, params=(), database: str = DATABASE) -> list[tuple]:
        with self.connect(database) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    # ------------------------------------------------------------------ life cycle

    def init(self, **settings: str) -> Cluster:
        self.tool("initdb", "-D", self.data, "-U", OWNER, "-A", "trust", "--no-sync", "-E", "UTF8")
        self.configure(**SETTINGS, **settings)
        return self

    def configure(self, **settings: str) -> None:
        """Append settings to postgresql.conf (the last occurrence of a name wins)."""
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())

    def start(self, *, port: int | None = None) -> None:
        self.port = port or self.port
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}"
        self.tool("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w", "-t", "30", "start")

    def stop(self, mode: str = "fast") -> None:
        """``immediate`` is a crash: no checkpoint, sessions cut, recovery at the next start."""
        if (self.data / "postmaster.pid").exists():
            self.tool("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "30", "stop", check=False)

    def promote(self) -> None:
        self.tool("pg_ctl", "-D", self.data, "-w", "-t", "30", "promote")

    def create_database(self, name: str = DATABASE) -> None:
        self.query(f'CREATE DATABASE "{name}"', database="postgres")

    def replica(self, name: str) -> Cluster:
        """A streaming standby of this server (pg_basebackup -R), started and streaming."""
        standby = Cluster(self.root, name)
        self.tool("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", OWNER, "-D", standby.data,
                  "-R", "-X", "stream", "--no-sync", "-c", "fast")
        standby.configure(cluster_name=name)  # its application_name on the primary
        standby.start()
        wait_until(lambda: self.query("SELECT 1 FROM pg_stat_replication WHERE application_name = %s AND "
                                      "state = 'streaming'", [name], database="postgres"),
                   timeout=30, message=f"{name} to stream from {self.name}")
        return standby

    # ------------------------------------------------------------------ backup

    def dump(self, path: Path, database: str = DATABASE) -> float:
        """pg_dump -Fc of a live database (one consistent snapshot); returns its seconds."""
        started = time.monotonic()
        self.tool("pg_dump", "-h", "127.0.0.1", "-p", str(self.port), "-U", OWNER, "-Fc", "-f", path, database)
        return time.monotonic() - started

    def restore(self, path: Path, database: str = DATABASE) -> float:
        """pg_restore into a new, empty database; returns its seconds."""
        started = time.monotonic()
        self.create_database(database)
        self.tool("pg_restore", "-h", "127.0.0.1", "-p", str(self.port), "-U", OWNER, "-d", database,
                  "--exit-on-error", "--no-owner", path)
        return time.monotonic() - started

    # ------------------------------------------------------------------ tools

    def tool(self, name: str, *args, check: bool = True) -> subprocess.CompletedProcess:
        argv = [str(pg_bin() / name), *map(str, args)]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", OWNER, "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, cwd=self.root, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"{name} failed ({result.returncode}): {result.stderr.strip() or result.stdout}"
                               f"{self._log_tail()}")
        return result

    def _log_tail(self) -> str:
        return f"\n--- {self.log.name} ---\n{self.log.read_text()[-2000:]}" if self.log.exists() else ""


@contextmanager
def cluster_root():
    """A directory the PostgreSQL tools may use (pytest's tmp_path is private to root),
    removed with every server in it stopped."""
    root = Path(tempfile.mkdtemp(prefix="recovery-drill-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam(OWNER)
        os.chown(root, owner.pw_uid, owner.pw_gid)
    try:
        yield root
    finally:
        for pid_file in root.glob("*/postmaster.pid"):
            Cluster(root, pid_file.parent.name).stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def migrate(url: str) -> None:
    """The schema, as an operator creates it: manage.py migrate against ``url``."""
    manage(url, "migrate", "--noinput", "-v", "0", check=True)


def verify_integrity(url: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """manage.py verify_integrity --json against ``url``, as an operator runs it; ``env``
    names the object store (the drill's processes' environment)."""
    return manage(url, "verify_integrity", "--json", env=env)


def manage(url: str, *args: str, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(env or os.environ, DATABASE_URL=url)
    return subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=check)


@contextmanager
def django_on(url: str):
    """This test process's Django connection uses ``url`` (any DATABASE_URL, several hosts
    included) until the block ends."""
    from django.db import connection

    from kernel.database_url import parse_database_url

    saved = dict(connection.settings_dict)
    parsed = parse_database_url(url)
    connection.close()
    connection.settings_dict.update({key: parsed[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
    connection.settings_dict["OPTIONS"] = {**saved.get("OPTIONS", {}), **parsed.get("OPTIONS", {})}
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)

