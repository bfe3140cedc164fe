"""The polling loops behind `manage.py scan` and `manage.py sweep`.

Any number of these processes may run: correctness comes from row locks, SKIP LOCKED
and unique keys, never from there being one of them.
"""

import logging
import signal
import threading
import time

import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from runs import authority
from kernel.startup import require_secrets

log = logging.getLogger(__name__)


class Stopper:
    """Set on SIGTERM/SIGINT so a loop finishes its transaction and exits cleanly."""

    def __init__(self, install_signals: bool = True):
        self.event = threading.Event()
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.event.set())
            signal.signal(signal.SIGINT, lambda *_: self.event.set())

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def wait(self, seconds: float) -> None:
        self.event.wait(seconds)


def scan_pass(*, buckets=None, batch_size=None) -> authority.MaterializeStats:
    """One scan cycle: end the timed pauses due (their catch-up is written as they resume),
    materialize everything due now, batch after batch (a run_all backlog releases its
    per-cycle share only), then release due pending runs."""
    authority.resume_due_pauses(buckets=buckets)
    total = authority.MaterializeStats()
    cycle = authority.ScanCycle()
    while True:
        stats = authority.materialize_due(batch_size=batch_size, buckets=buckets, cycle=cycle)
        total.add(stats)
        if stats.schedules == 0:
            break
    while authority.promote_due_runs():
        pass
    authority.release_backfill()  # a share per cycle, like a run_all backlog
    return total


def sweep_pass() -> int:
    total = 0
    while True:
        swept = authority.sweep_expired_leases()
        total += swept
        if not swept:
            return total


def guarded(step, *, name: str) -> bool:
    """Call ``step``; survive a database outage by dropping the connection. False if it failed."""
    try:
        close_old_connections()
        step()
        return True
    except (DatabaseError, InterfaceError) as exc:
        # Terminated backend, failover, restart: drop the connection and try again.
        log.warning("%s: database error, reconnecting: %s", name, exc)
        connection.close()
        return False


class Wakeup:
    """Waits that a PostgreSQL NOTIFY on ``channel`` ends early (LISTEN on the loop's own
    connection, again after every reconnect). Elsewhere the wait simply lasts, and the
    loop's poll stays the guarantee: on SQLite, and behind PgBouncer in transaction pooling
    (``DATABASE_POOLER=pgbouncer``), where a LISTEN would stay behind on a pooled server
    session that other clients then use."""

    def __init__(self, channel: str, stopper: Stopper):
        self.channel = channel
        self.stopper = stopper
        self.listening_on = None  # the raw connection LISTEN was sent on

    def wait(self, seconds: float) -> None:
        raw = connection.connection
        if connection.vendor != "postgresql" or settings.DATABASE_POOLER or raw is None or seconds <= 0:
            self.stopper.wait(seconds)
            return
        try:
            if raw is not self.listening_on:
                with connection.cursor() as cursor:
                    cursor.execute(f'LISTEN "{self.channel}"')
                self.listening_on = raw
            for _ in raw.notifies(timeout=seconds, stop_after=1):
                pass
        except (DatabaseError, InterfaceError, OSError, psycopg.Error) as exc:
            # The raw connection raises psycopg's own errors (a terminated backend, a failover):
            # drop it, so the next step reconnects and listens again.
            log.warning("%s: wake-up lost, polling: %s", self.channel, exc)
            self.listening_on = None
            connection.close()
            self.stopper.wait(seconds)


def run_forever(step, *, interval: float, stopper: Stopper, name: str, listen: str | None = None) -> None:
    """Call ``step`` every ``interval`` seconds, or sooner on a NOTIFY on ``listen``;
    survive database outages by reconnecting."""
    waits = Wakeup(listen, stopper) if listen else stopper
    while not stopper.stopped:
        started = time.monotonic()
        guarded(step, name=name)
        waits.wait(max(0.0, interval - (time.monotonic() - started)))


class LoopCommand(BaseCommand):
    """A management command that calls ``step`` every ``interval`` seconds, or once.

    Subclasses set ``name`` and ``default_interval`` and implement ``step(**options)``,
    returning something printable for ``--once`` and falsy when there was nothing to do.
    """

    name = "loop"
    default_interval = 1.0
    listen = None  # a NOTIFY channel that wakes the loop before its interval passes

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument("--interval", type=float, default=self.default_interval)

    def step(self, **options):
        raise NotImplementedError

    def handle(self, *args, once, interval, **options):
        require_secrets()
        log = logging.getLogger(f"scheduler.{self.name}")

        def step():
            result = self.step(**options)
            if result:
                log.info("%s: %s", self.name, result)
            return result

        if once:
            self.stdout.write(f"{self.name}: {step()}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name=self.name, listen=self.listen)
