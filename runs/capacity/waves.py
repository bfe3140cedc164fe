"""Queue simulation of waves of due occurrences against a resource class's slots. Pure
Python: the forecast, admission and `manage.py capacity` share it, and tests drive it with
hand-computed waves.

Occurrences due at the same instant with the same expected duration travel as one
`Arrival` with a count, and slots that become free at the same time as one group, so the
design's 09:00 burst (50,000 five-second runs on 10,000 slots) costs five steps, not
50,000. Slots serve arrivals first come, first served, each on the slot free earliest;
a slot busy with earlier work is free from its `busy_until`.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds on the simulation's clock
    duration: float  # expected seconds of execution, each
    count: int = 1
    key: object = None  # lateness is reported per key (a minute, a tenant's share, ...)


@dataclass
class Lateness:
    """Start lateness of a set of occurrences: seconds late -> how many."""

    counts: dict[float, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, seconds: float, count: int) -> None:
        self.counts[seconds] += count

    def percentile(self, p: float) -> float | None:
        """The nearest-rank percentile (p in 0..100): the smallest lateness at least p % of
        the occurrences do not exceed. None without occurrences."""
        total = self.total
        if not total:
            return None
        rank = max(1, math.ceil(p / 100 * total))
        seen = 0
        for seconds in sorted(self.counts):
            seen += self.counts[seconds]
            if seen >= rank:
                return seconds
        return math.inf

    def share_later_than(self, seconds: float) -> float:
        total = self.total
        return sum(n for s, n in self.counts.items() if s > seconds) / total if total else 0.0


class SlotPool:
    """Slots grouped by the time they become free."""

    def __init__(self, slots: int, *, start: float = 0.0, busy_until: list[float] = ()):
        busy = [t for t in busy_until if t > start][:max(0, slots)]
        self._free: dict[float, int] = defaultdict(int)
        self._heap: list[float] = []
        self._give(start, max(0, slots) - len(busy))
        for until in busy:
            self._give(until, 1)

    @property
    def slots(self) -> int:
        return sum(self._free.values())

    def _give(self, at: float, count: int) -> None:
        if count <= 0:
            return
        if at not in self._free or not self._free[at]:
            heapq.heappush(self._heap, at)
        self._free[at] += count

    def start(self, arrival: Arrival, lateness: Lateness) -> None:
        """Start every occurrence of `arrival` on the slots free earliest, recording each
        start's lateness. Without any slot, each one is infinitely late."""
        if not self._heap:
            lateness.add(math.inf, arrival.count)
            return
        remaining = arrival.count
        while remaining:
            free_at = self._heap[0]
            starts = max(free_at, arrival.at)
            # Every group free by the arrival starts it at the same instant: use them together.
            available = 0
            while self._heap and self._heap[0] <= starts:
                group = heapq.heappop(self._heap)
                available += self._free.pop(group)
            taken = min(available, remaining)
            lateness.add(round(starts - arrival.at, 6), taken)
            remaining -= taken
            self._give(starts, available - taken)
            self._give(starts + arrival.duration, taken)


def simulate(arrivals: list[Arrival], slots: int, *, busy_until: list[float] = (), start: float = 0.0) -> dict:
    """Lateness per arrival key of `arrivals` served by `slots` slots, those in `busy_until`
    busy with earlier work until then. Arrivals of the same instant start in list order."""
    pool = SlotPool(slots, start=start, busy_until=busy_until)
    lateness: dict[object, Lateness] = defaultdict(Lateness)
    for arrival in sorted(arrivals, key=lambda a: a.at):
        pool.start(arrival, lateness[arrival.key])
    return dict(lateness)


def wave_lateness(arrivals: list[Arrival], slots: int, *, busy_until: list[float] = ()) -> Lateness:
    """The lateness of all of `arrivals` together."""
    total = Lateness()
    for part in simulate(arrivals, slots, busy_until=busy_until).values():
        for seconds, count in part.counts.items():
            total.add(seconds, count)
    return total


def slots_needed(arrivals: list[Arrival], objective: float, *, percentile: float = 99,
                 busy_until: list[float] = ()) -> int:
    """The fewest slots with which the arrivals of every key start within `objective`
    seconds at `percentile`. Slots busy with earlier work (`busy_until`) come on top."""
    total = sum(a.count for a in arrivals)
    busy = len(busy_until)
    if not total:
        return busy

    def meets(slots: int) -> bool:
        lateness = simulate(arrivals, slots + busy, busy_until=busy_until).values()
        return all(part.percentile(percentile) <= objective for part in lateness if part.total)

    return fewest(meets, low=1, high=total) + busy  # one slot per occurrence starts each at its instant


def fewest(meets, *, low: int, high: int) -> int:
    """The smallest n in [low, high] for which meets(n) holds (high if none does before);
    ``meets`` must be monotonic."""
    while low < high:
        middle = (low + high) // 2
        if meets(middle):
            high = middle
        else:
            low = middle + 1
    return low
