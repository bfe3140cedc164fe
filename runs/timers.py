"""The timer horizon: a scanner's due instants of the next minute, held in memory and fired
at their instant (the design's section 09, "Fourth, prepare near-term work").

The database stays the only authority. A timer says only "look at schedule S at instant
T": firing it locks the schedule row by key and materializes what the row says then, so an
edit, pause or delete after loading is never lost nor run with a stale payload (the
revision and its payload are read under that lock). A timer lost (a restart, a refresh
that missed a change) costs punctuality only: the scanner's poll of the due index still
finds the instant, and a restart rebuilds the timers from that index.
"""

from __future__ import annotations

import heapq
import time
from datetime import timedelta

from django.conf import settings

from runs import authority, metrics
from scheduler_project.clock import authority_now
from schedules.models import Schedule


class Timers:
    """A min-heap of (due instant as a POSIX timestamp, schedule id) within the horizon."""

    def __init__(self, *, horizon_seconds: float | None = None, cap: int | None = None):
        self.horizon = timedelta(seconds=horizon_seconds or settings.SCAN_TIMER_HORIZON_SECONDS)
        self.cap = cap or settings.SCAN_TIMER_CAP
        self.heap: list[tuple[float, str]] = []
        self.offset = 0.0  # database clock minus this process's clock, seconds

    def __len__(self) -> int:
        return len(self.heap)

    def load(self, buckets) -> int:
        """Replace the timers with the due index's instants in (now, now + horizon] of
        ``buckets``; returns how many are held."""
        now = authority_now()
        self.offset = now.timestamp() - time.time()
        rows = _upcoming(Schedule.objects.filter(bucket__in=list(buckets)), now, now + self.horizon, self.cap)
        self.heap = [(at.timestamp(), schedule_id) for at, schedule_id in rows]  # sorted: a heap already
        return len(self.heap)

    def add_next(self, schedule_ids: list[str]) -> None:
        """Timers for the next instants of schedules just materialized, if within the horizon."""
        now = authority_now()
        rows = _upcoming(Schedule.objects.filter(id__in=schedule_ids), now, now + self.horizon, self.cap)
        for at, schedule_id in rows:
            heapq.heappush(self.heap, (at.timestamp(), schedule_id))

    def db_time(self) -> float:
        """The database clock now, as this process estimates it."""
        return time.time() + self.offset

    def seconds_to_next(self) -> float | None:
        """Seconds until the earliest timer is due (0 when it is), None with no timers."""
        return max(0.0, self.heap[0][0] - self.db_time()) if self.heap else None

    def pop_due(self) -> list[str]:
        """The schedule ids whose instant has come, each once, earliest first."""
        due, now = [], self.db_time()
        while self.heap and self.heap[0][0] <= now:
            due.append(heapq.heappop(self.heap)[1])
        return list(dict.fromkeys(due))


def _upcoming(schedules, start, end, cap: int) -> list[tuple]:
    return list(
        schedules.filter(next_run_at__gt=start, next_run_at__lte=end, paused=False, deleted_at__isnull=True)
        .order_by("next_run_at").values_list("next_run_at", "id")[:cap]
    )


def fire(timers: Timers, schedule_ids: list[str], *, batch_size: int | None = None) -> authority.MaterializeStats:
    """Materialize the fired schedules that are due, found by key in batches; queue timers
    for their next instants."""
    batch_size = batch_size or settings.SCAN_BATCH_SIZE
    total = authority.MaterializeStats()
    cycle = authority.ScanCycle()
    for chunk in _chunks(schedule_ids, batch_size):
        while True:
            stats = authority.materialize_due(batch_size=batch_size, ids=chunk, cycle=cycle)
            total.add(stats)
            if stats.schedules == 0:
                break
    metrics.TIMERS_FIRED.inc(len(schedule_ids))
    timers.add_next(schedule_ids)
    return total


FIRST_CHUNK = 50  # a wave's first commit is small, so its first hints leave within milliseconds


def _chunks(ids: list[str], size: int):
    """``ids`` in transactions of ``size``, the first one of at most FIRST_CHUNK."""
    first = min(size, FIRST_CHUNK)
    yield ids[:first]
    for start in range(first, len(ids), size):
        yield ids[start:start + size]
