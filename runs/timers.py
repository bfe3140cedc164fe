"""The timer horizon: a scanner's due instants of the next minute, held in memory and fired
at their instant: the near-term work prepared ahead (docs/design.md, "The life of a run", 1).

The database stays the only authority. A timer says only "look at schedule S at instant
T": firing it locks the schedule row by key and materializes what the row says then, so an
edit, pause or delete after loading is never lost nor run with a stale payload (the
revision and its payload are read under that lock). A timer lost (a restart, a refresh
that missed a change) costs punctuality only: the scanner's poll of the due index still
finds the instant, and a restart rebuilds the timers from that index.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from runs import authority, metrics
from kernel.clock import authority_now
from schedules.models import Schedule

log = logging.getLogger("scheduler.scan")


class Timers:
    """A min-heap of (due instant as a POSIX timestamp, schedule id) within the horizon."""

    def __init__(self, *, horizon_seconds: float | None = None, cap: int | None = None):
        self.horizon = timedelta(seconds=horizon_seconds or settings.SCAN_TIMER_HORIZON_SECONDS)
        self.cap = cap or settings.SCAN_TIMER_CAP
        self.heap: list[tuple[float, str]] = []
        self.offset = 0.0  # database clock minus this process's clock, seconds
        self.armed: dict[str, authority.Armed] = {}  # read ahead, fired by one guarded statement
        self.arm_ahead = timedelta(seconds=settings.SCAN_TIMER_ARM_SECONDS)
        self.connections = FireConnections(settings.SCAN_FIRE_CONNECTIONS)

    def __len__(self) -> int:
        return len(self.heap)

    def load(self, buckets) -> int:
        """Replace the timers with the due index's instants in (now, now + horizon] of
        ``buckets``; returns how many are held."""
        now = authority_now()
        self.offset = now.timestamp() - time.time()
        rows = _upcoming(Schedule.objects.filter(bucket__in=list(buckets)), now, now + self.horizon, self.cap)
        self.heap = [(at.timestamp(), schedule_id) for at, schedule_id in rows]  # sorted: a heap already
        self.arm(rows, now)
        return len(self.heap)

    def arm(self, rows, now) -> None:
        """Arm the timers of ``rows`` (instant, schedule id) due within arm_ahead of ``now``;
        one armed before for the same instant is kept (its guard catches any change since),
        and arms of schedules no longer due at their instant are dropped."""
        soon = {schedule_id: at for at, schedule_id in rows if at <= now + self.arm_ahead}
        self.armed = {i: a for i, a in self.armed.items() if soon.get(i) == a.next_run_at}
        todo = [i for i in soon if i not in self.armed]
        if todo:
            self.armed.update(authority.arm(todo))
        if len(self.armed) > FIRST_CHUNK:
            self.connections.ready()  # connected before the instant, not at it

    def add_next(self, schedule_ids: list[str]) -> None:
        """Timers for the next instants of schedules just materialized, if within the horizon."""
        now = authority_now()
        rows = _upcoming(Schedule.objects.filter(_among(schedule_ids)), now, now + self.horizon, self.cap)
        for at, schedule_id in rows:
            heapq.heappush(self.heap, (at.timestamp(), schedule_id))

    def fire_armed(self, armed: list, batch_size: int) -> list[tuple]:
        """Fire armed schedules, one guarded statement per batch: the first (small) batches on
        this thread's connection, the others SCAN_FIRE_CONNECTIONS at a time, each thread on
        a connection of its own (the database does the work; the batches are independent).
        Returns (stats, ids written) per batch; a batch that failed wrote nothing."""
        chunks = list(_chunks(armed, batch_size))
        # The first two here, one after the other: the relay publishes their hints meanwhile,
        # with a core to itself (measured: firing in parallel at once delayed the first hint).
        first = [authority.fire_armed(chunk) for chunk in chunks[:2]]
        return first + self.connections.map(_fire_on_own_connection, chunks[2:])

    def close(self) -> None:
        self.connections.close()

    def db_time(self) -> float:
        """The database clock now, as this process estimates it."""
        return time.time() + self.offset

    def seconds_to_next(self) -> float | None:
        """Seconds until the earliest timer is due (0 when it is), None with no timers."""
        return max(0.0, self.heap[0][0] - self.db_time()) if self.heap else None

    def pop_due(self, limit: int | None = None) -> list[str]:
        """The schedule ids whose instant has come (at most ``limit``), each once, earliest
        first. A pop costs about a microsecond: 10 ms for a wave of 10,000."""
        due, now = [], self.db_time()
        while self.heap and self.heap[0][0] <= now and (limit is None or len(due) < limit):
            due.append(heapq.heappop(self.heap)[1])
        return list(dict.fromkeys(due))


def _among(ids: list[str]):
    """``id IN ids``: on PostgreSQL one array parameter, not one parameter per id."""
    if connection.vendor != "postgresql":
        return Q(id__in=ids)
    return RawSQL(f'"{Schedule._meta.db_table}"."id" = ANY(%s)', [list(ids)], output_field=BooleanField())


def _upcoming(schedules, start, end, cap: int) -> list[tuple]:
    return list(
        schedules.filter(next_run_at__gt=start, next_run_at__lte=end, paused=False, deleted_at__isnull=True)
        .order_by("next_run_at").values_list("next_run_at", "id")[:cap]
    )


def fire(timers: Timers, schedule_ids: list[str], *, batch_size: int | None = None) -> authority.MaterializeStats:
    """Materialize the fired schedules that are due: the armed ones by one guarded statement
    per batch, the rest (and any the guard left out) found by key and locked, in batches;
    queue timers for their next instants."""
    batch_size = batch_size or settings.SCAN_BATCH_SIZE
    total = authority.MaterializeStats()
    written: set[str] = set()
    for stats, ids in timers.fire_armed([timers.armed.pop(i) for i in schedule_ids if i in timers.armed], batch_size):
        total.add(stats)
        written |= ids
    cycle = authority.ScanCycle()
    for chunk in _chunks([i for i in schedule_ids if i not in written], batch_size):
        while True:
            stats = authority.materialize_due(batch_size=batch_size, ids=chunk, cycle=cycle)
            total.add(stats)
            if stats.schedules == 0:
                break
    metrics.TIMERS_FIRED.inc(len(schedule_ids))
    timers.add_next(schedule_ids)
    return total


class FireConnections:
    """Threads that each hold a database connection of their own, to fire an armed wave's
    batches at once; with one, the caller's thread fires them one after the other."""

    def __init__(self, size: int):
        self.size = size
        self.pool: ThreadPoolExecutor | None = None

    def ready(self) -> None:
        """Start the threads and (re)connect each, if its connection is gone."""
        if self.size > 1:
            self.pool = self.pool or ThreadPoolExecutor(self.size, thread_name_prefix="fire")
            self._on_each(_usable_connection)

    def map(self, step, items: list) -> list:
        if self.size <= 1 or not items:
            return [step(item) for item in items]
        if self.pool is None:
            self.ready()
        return list(self.pool.map(step, items))

    def close(self) -> None:
        if self.pool is not None:
            self._on_each(lambda: connection.close())  # each thread's own
            self.pool.shutdown()
            self.pool = None

    def _on_each(self, step) -> None:
        barrier = threading.Barrier(self.size)  # every thread takes exactly one

        def once(_):
            barrier.wait(10)
            step()

        list(self.pool.map(once, range(self.size)))


def _usable_connection() -> None:
    if connection.connection is not None and not connection.is_usable():
        connection.close()
    connection.ensure_connection()


def _fire_on_own_connection(chunk: list) -> tuple:
    try:
        return authority.fire_armed(chunk)
    except (DatabaseError, InterfaceError) as exc:  # its schedules take the locking path
        log.warning("scan: armed batch failed, reconnecting: %s", exc)
        connection.close()
        return authority.MaterializeStats(), set()


# A wave's first commit is small, so its first hints leave within milliseconds: planning and
# writing cost about 0.1 ms per schedule, on top of a commit's fixed few.
FIRST_CHUNK = 10


def _chunks(ids: list, size: int):
    """``ids`` in transactions of ``size``, the first one of at most FIRST_CHUNK."""
    if not ids:
        return
    first = min(size, FIRST_CHUNK)
    yield ids[:first]
    for start in range(first, len(ids), size):
        yield ids[start:start + size]
