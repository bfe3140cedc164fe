"""PostgreSQL connections: a fixed budget per process, and PgBouncer in transaction pooling.

Every process holds at most a known number of connections (docs/operations.md, "Connection
budget"). The web process is the only one whose concurrency comes from outside: its
gunicorn threads share one psycopg pool (Django's ``OPTIONS["pool"]``) of at most
``DATABASE_POOL_MAX_SIZE`` connections, and a request that waits longer than
``DATABASE_POOL_TIMEOUT_SECONDS`` for one is answered 503 with ``Retry-After``. Every other
process talks to the database from a fixed number of threads, one connection each; those
processes fork (Celery prefork) and keep Django's per-thread connections, no pool.

Behind PgBouncer in transaction pooling mode (``DATABASE_POOLER=pgbouncer``) one client's
consecutive transactions may run in different server sessions: nothing may rely on session
state. The scheduler takes no session-level advisory lock, LISTENs only when connected
directly (the relay's wake-up, runs.loops.Wakeup; it polls behind a pooler), and sets
nothing beyond the transaction (``SET LOCAL``, ``SET TRANSACTION``); what remains is the
driver's side, handled here.
"""

from __future__ import annotations

import os
import select
import sys
from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured

POOLERS = ("", "pgbouncer")


def configure_postgresql(database: dict, *, pooler: str, idle_in_transaction_seconds: int) -> None:
    """Driver options of a PostgreSQL ``DATABASES`` entry, reached directly or through ``pooler``."""
    if pooler not in POOLERS:
        raise ImproperlyConfigured(f"DATABASE_POOLER must be empty or 'pgbouncer', not {pooler!r}")
    database["CONN_HEALTH_CHECKS"] = True
    options = database.setdefault("OPTIONS", {})
    if pooler == "pgbouncer":
        # A prepared statement lives in one server session; the next transaction may find
        # another (PgBouncer 1.18 does not track them). Django's default, made unconditional.
        options["prepare_threshold"] = None
        # Django keeps a server-side cursor open WITH HOLD past its transaction in autocommit.
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        # PgBouncer refuses the `options` startup parameter; its idle_transaction_timeout (or
        # ALTER ROLE ... SET idle_in_transaction_session_timeout) ends stalled transactions.
        options.pop("options", None)
        return
    # Statements may be prepared (server_cursor(prepared=True) asks; Django's own cursors bind
    # client-side and never are); psycopg refuses when this is None, Django's default.
    options.setdefault("prepare_threshold", 5)
    # A process paused inside a transaction (GC stall, SIGSTOP, frozen VM) keeps its row
    # locks, and no lease ends them: PostgreSQL ends such a session instead.
    options["options"] = "-c idle_in_transaction_session_timeout=%d" % (idle_in_transaction_seconds * 1000)


def use_connection_pool(database: dict, *, max_size: int, timeout: float) -> None:
    """This process's threads share a pool of at most ``max_size`` connections (the web
    process: use_web_connection_pool). Call before Django opens a connection to ``database``;
    calling it again with the same pool changes nothing."""
    if database["ENGINE"] != "django.db.backends.postgresql" or max_size <= 0:
        return
    pool = {
        "min_size": 1,
        "max_size": max_size,
        "timeout": timeout,
        # Connections beyond min_size that stay unused this long are closed.
        "max_idle": 60,
        "name": "web",
    }
    if database["OPTIONS"].get("pool") == pool and database["CONN_MAX_AGE"] == 0:
        return  # runserver applied it before its checks; wsgi.py, loaded after them, finds it here
    from django.db import connections

    # Django's connections read this very dict when they connect, so changing it is enough
    # until one is open: an open one would stay outside the pool, persistent.
    if any(live.settings_dict is database and live.connection is not None
           for live in connections.all(initialized_only=True)):
        raise ImproperlyConfigured("use_connection_pool() must run before Django opens a connection")
    database["CONN_MAX_AGE"] = 0  # Django's pool requires it: a request returns its connection
    database["OPTIONS"]["pool"] = pool
    os.register_at_fork(after_in_child=forget_inherited_pools)


def use_web_connection_pool() -> None:
    """The web process's pool, as settings size it: gunicorn's (scheduler_project/wsgi.py) and
    runserver's (workers/management/commands/runserver.py)."""
    from django.conf import settings

    use_connection_pool(settings.DATABASES["default"], max_size=settings.DATABASE_POOL_MAX_SIZE,
                        timeout=settings.DATABASE_POOL_TIMEOUT_SECONDS)


def forget_inherited_pools() -> None:
    """In a forked child: drop pools inherited from the parent without closing them. Their
    sockets are the parent's (closing would end its sessions; psycopg never closes another
    process's connection when it is collected), and their worker threads did not survive
    the fork. The child opens a pool of its own on first use."""
    backend = sys.modules.get("django.db.backends.postgresql.base")
    if backend is not None:
        backend.DatabaseWrapper._connection_pools.clear()


def server_cursor(*, prepared: bool = False):
    """A cursor of the default connection that binds parameters server-side, where PostgreSQL
    is the database (Django's own cursor elsewhere): a list goes as one binary array instead
    of being spelled out in the statement. Django's wrapper stays around it (error
    translation, query capture in tests).

    ``prepared``: the statement is prepared on the connection at its first execution, so
    PostgreSQL parses and plans its text once, not at every execution (reading a run by id:
    0.20 ms of the server's CPU, 0.02 prepared). For the reads every request makes, whose
    text never varies and whose plan is the same whatever the values (rows by key). Behind
    PgBouncer nothing is prepared (configure_postgresql)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.ensure_connection()
    return connection._prepare_cursor(_binding_cursors()[prepared](connection.connection))


def statement_cursor(*, prepared: bool):
    """The cursor of a statement PostgreSQL prepares (server_cursor(prepared=True)) or, unprepared,
    Django's own, which binds client-side: bound server-side without being prepared, the
    catalogue's statements gained nothing (BENCHMARKS.md)."""
    from django.db import connection

    return server_cursor(prepared=True) if prepared else connection.cursor()


def prepares(cursor) -> bool:
    """Whether ``cursor`` (Django's wrapper or the driver's own) prepares its statements:
    one of server_cursor(prepared=True)'s."""
    return isinstance(getattr(cursor, "cursor", cursor), _binding_cursors()[True])


@lru_cache
def _binding_cursors() -> dict:
    from django.db.backends.postgresql.base import ServerBindingCursor  # PostgreSQL only

    class Prepared(ServerBindingCursor):
        def execute(self, query, params=None, **kwargs):
            return super().execute(query, params, **kwargs | {"prepare": True})

        def _send_query_prepared(self, name, pgq, **kwargs):
            self._query = pgq  # as psycopg records an unprepared execution: Django's query log reads it
            super()._send_query_prepared(name, pgq, **kwargs)

    class Unprepared(ServerBindingCursor):
        def execute(self, query, params=None, **kwargs):
            return super().execute(query, params, **kwargs | {"prepare": False})

    return {True: Prepared, False: Unprepared}


def pool_checks_without_round_trip(sender, connection, **kwargs) -> None:
    """``connection_created``: the web pool checks the connection it hands a request with
    check_pooled_connection instead of Django's (``CONN_HEALTH_CHECKS``: an empty query, one
    round trip per request, 4 % of a page's CPU in the web process)."""
    pool = getattr(connection, "pool", None)  # PostgreSQL's web process only
    if pool is not None and pool._check is not None and pool._check is not check_pooled_connection:
        pool._check = check_pooled_connection  # psycopg_pool keeps its `check` argument here


def check_pooled_connection(conn) -> None:
    """Raise unless ``conn``, idle in the pool, still works: checked with a round trip only if
    it is closed or its server has sent something since its last statement. A server ending a
    session (a restart, ``pg_terminate_backend``, ``idle_session_timeout``) sends its reason
    and closes the socket, which is then readable; an idle session that still works sends
    nothing (the web process does not LISTEN). A failed check leaves the connection broken,
    which the pool replaces; a host that vanished without closing is found by the request's
    statement, as it would be a moment after any check."""
    from psycopg_pool import ConnectionPool

    if conn.closed or select.select([conn.fileno()], [], [], 0)[0]:
        ConnectionPool.check_connection(conn)


def compiled_timestamptz_loader(sender, connection, **kwargs) -> None:
    """``connection_created``: read ``timestamptz`` with psycopg's compiled parser. Django
    registers a loader that subclasses psycopg's pure-Python one (to give each instant the
    connection's zone), so every timestamp read took the Python path even with the compiled
    module installed: 411 of them on a page of 50 runs, about 3 µs each. This loader keeps
    what Django's does (the ``timezone`` its ``create_cursor`` compares, each instant given
    that zone) and parses in C. Where the session's zone is that zone (Django sets it so),
    the C parser's instant is the answer as it is: 0.4 µs an instant, 1.3 through a Python
    method that gives it the zone again."""
    if connection.vendor != "postgresql":
        return
    loader = _timestamptz_loader(connection.timezone)
    if loader is not None:
        connection.connection.adapters.register_loader("timestamptz", loader)


@lru_cache
def _timestamptz_loader(zone):
    from psycopg._cmodule import _psycopg
    from psycopg._tz import get_tzinfo
    from psycopg.adapt import Loader

    if _psycopg is None:  # psycopg's pure-Python build: Django's loader is as fast
        return None

    class CompiledTimestamptzLoader(Loader):
        timezone = zone

        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            parse = _psycopg.TimestamptzLoader(oid, context).load
            connection = context.connection if context is not None else None
            if get_tzinfo(connection.pgconn if connection is not None else None) is zone:
                self.load = parse  # the session's zone is this very one: each instant read has it (0.4 µs, not 1.3)
            else:
                self._parse = parse

        def load(self, data):
            return self._parse(data).replace(tzinfo=self.timezone)

    return CompiledTimestamptzLoader
