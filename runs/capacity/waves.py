"""Queue simulation of waves of due occurrences against a resource class's slots, in the
order the claim serves them (runs.authority.claims): each free slot goes to the tenant with
the lowest running/weight share (runs.fair_share.allocate_slots; among equal shares, a
tenant with a strict run waiting first, then the one whose first run in claim order is
oldest); within a tenant strict runs first, then by due instant; ordinary runs stop at the
class's capacity reserved for strict work (STRICT_RESERVED_SHARE); a tenant never runs more
than its active-run limit. Arrivals without a tenant form one queue: first come, first
served. Pure Python: the forecast, admission and `manage.py capacity` share it, and tests
drive it with hand-computed waves.

Occurrences due at the same instant with the same tenant, strictness and expected duration
travel as one `Arrival` with a count, and slots that become free at the same time as one
group, so the design's 09:00 burst (50,000 five-second runs on 10,000 slots) costs five
steps, not 50,000. A simulation given a `budget` stops after that many steps
(SimulationTooLong): its cost is bounded whatever the schedules ask for.
"""

from __future__ import annotations

import heapq
import math
from operator import attrgetter
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from runs.fair_share import TenantLoad, allocate_slots

UNLIMITED = 10**12


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds on the simulation's clock
    duration: float  # expected seconds of execution, each; 0: a probe, which takes no capacity
    count: int = 1
    key: object = None  # lateness is reported per key (a minute, a tenant's share, ...)
    tenant: str | None = None  # None: the anonymous tenant (one first-come, first-served queue)
    strict: bool = False  # a strict run: first within its tenant, may take the reserved slots


@dataclass(frozen=True)
class Busy:
    """A slot busy with a run started before the simulation, free from `until`."""

    until: float
    tenant: str | None = None
    strict: bool = False


@dataclass(frozen=True)
class Claimants:
    """What the claim order needs beyond the arrivals: each tenant's weight and active-run
    limit (a tenant not named has weight 1 and no limit) and the share of the slots reserved
    for strict runs."""

    tenants: dict = field(default_factory=dict)  # tenant id -> (weight, max running)
    reserved_share: float = 0.0

    def weight(self, tenant) -> int:
        return self.tenants.get(tenant, (1, UNLIMITED))[0]

    def max_running(self, tenant) -> int:
        return self.tenants.get(tenant, (1, UNLIMITED))[1]


FIRST_COME = Claimants()


class Steps:
    """A budget of simulation steps, shared by every simulation given it."""

    def __init__(self, limit: int):
        self.left = limit

    def spend(self, n: int, reached: float = 0.0) -> None:
        self.left -= n
        if self.left < 0:
            raise SimulationTooLong(reached)


class _Missed(Exception):
    """A key cannot meet the objective any more: the simulation has answered."""


class SimulationTooLong(Exception):
    """The simulation took its whole budget of steps; `reached`: the simulated time by then."""

    def __init__(self, reached: float):
        super().__init__(f"simulation budget spent at {reached:g} s")
        self.reached = reached


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


class _Waiting:
    """One tenant's queued runs: strict ones, then ordinary ones, each by due instant."""

    def __init__(self):
        self.strict: deque = deque()  # [at, duration, count, key]
        self.ordinary: deque = deque()
        self.count = 0

    def first_at(self) -> float:
        """The due instant of its first run in claim order."""
        return (self.strict or self.ordinary)[0][0]


class _Claim:
    """The state of one simulation: the slots, the tenants' queues and running counts."""

    def __init__(self, slots: int, claimants: Claimants, busy: list[Busy], start: float):
        self.claimants = claimants
        self.slots = max(0, slots)
        share = claimants.reserved_share
        # As runs.authority.reserve: ordinary runs only below floor((1 - share) x live slots).
        self.ordinary_cap = math.floor((1 - share) * self.slots + 1e-9) if share > 0 and self.slots else UNLIMITED
        self.waiting: dict[object, _Waiting] = {}
        self.running: Counter = Counter()
        self.running_ordinary = 0
        self.frees: dict[float, Counter] = {}  # instant -> (tenant, strict) -> slots freed then
        self.watch, self.watched = None, 0  # a test of keys, and how many watched runs still wait
        self.objective, self.misses = math.inf, None  # key -> runs that may still start later than the objective
        self.heap: list[float] = []
        busy = [b for b in busy if b.until > start][: self.slots]
        self.free = self.slots - len(busy)
        for b in busy:
            self._hold(b.until, b.tenant, b.strict, 1)

    def _hold(self, until: float, tenant, strict: bool, count: int) -> None:
        if until not in self.frees:
            self.frees[until] = Counter()
            heapq.heappush(self.heap, until)
        self.frees[until][tenant, strict] += count
        self.running[tenant] += count
        if not strict:
            self.running_ordinary += count

    def release(self, now: float) -> None:
        while self.heap and self.heap[0] <= now:
            for (tenant, strict), count in self.frees.pop(heapq.heappop(self.heap)).items():
                self.free += count
                self.running[tenant] -= count
                if not strict:
                    self.running_ordinary -= count

    def enqueue(self, arrival: Arrival) -> None:
        waiting = self.waiting.get(arrival.tenant)
        if waiting is None:
            waiting = self.waiting[arrival.tenant] = _Waiting()
        queue = waiting.strict if arrival.strict else waiting.ordinary
        queue.append([arrival.at, arrival.duration, arrival.count, arrival.key])
        waiting.count += arrival.count

    def serve(self, now: float, lateness: dict) -> None:
        """Give the free slots out in claim order, as long as anyone can take one; a tenant
        that takes fewer than its share (its limit, or the reserve) is passed over after."""
        exhausted = set()
        while self.free:
            waiting = [(tenant, queue) for tenant, queue in self.waiting.items() if tenant not in exhausted]
            wants = {tenant: min(queue.count, self.claimants.max_running(tenant) - self.running[tenant])
                     for tenant, queue in waiting}
            if sum(n for n in wants.values() if n > 0) <= self.free:  # the common case: room for everyone
                shares = {tenant: n for tenant, n in wants.items() if n > 0}
            elif len(waiting) == 1:
                tenant, queue = waiting[0]
                shares = {tenant: self.free}
            else:
                waiting.sort(key=lambda item: (not item[1].strict, item[1].first_at(), str(item[0])))
                shares = allocate_slots([
                    TenantLoad(tenant, self.claimants.weight(tenant), self.running[tenant],
                               min(self.claimants.max_running(tenant), self.running[tenant] + queue.count))
                    for tenant, queue in waiting], self.free)
            if not shares:
                return
            for tenant, share in shares.items():
                if self._start(tenant, share, now, lateness) < share:
                    exhausted.add(tenant)

    def _start(self, tenant, share: int, now: float, lateness: dict) -> int:
        """Start up to `share` of the tenant's runs: strict ones first, then ordinary ones as
        far as the reserve leaves room. Probes (no duration) give their slot back at once."""
        waiting = self.waiting[tenant]
        started = 0
        for queue, strict in ((waiting.strict, True), (waiting.ordinary, False)):
            while queue and started < share:
                room = share - started
                if not strict:
                    room = min(room, self.ordinary_cap - self.running_ordinary)
                    if room <= 0:
                        break
                item = queue[0]
                at, duration, count, key = item
                taken = min(count, room)
                late = round(now - at, 6)
                lateness[key].add(late, taken)
                if self.misses is not None and late > self.objective:
                    self.misses[key] -= taken
                    if self.misses[key] < 0:
                        raise _Missed
                if self.watch is not None and self.watch(key):
                    self.watched -= taken
                if duration > 0:
                    self.free -= taken
                    self._hold(now + duration, tenant, strict, taken)
                started += taken
                waiting.count -= taken
                if taken == count:
                    queue.popleft()
                else:
                    item[2] -= taken
        if not waiting.count:
            del self.waiting[tenant]
        return started

    def never(self, lateness: dict) -> None:
        """What is still waiting never starts."""
        for waiting in self.waiting.values():
            for queue in (waiting.strict, waiting.ordinary):
                for _, _, count, key in queue:
                    lateness[key].add(math.inf, count)
        self.waiting.clear()


def simulate(arrivals: list[Arrival], slots: int, *, busy_until: list = (), start: float = 0.0,
             claimants: Claimants = FIRST_COME, budget: Steps | None = None, until: float = math.inf,
             watch=None, misses=None) -> dict:
    """Lateness per arrival key of `arrivals` served by `slots` slots in claim order, those in
    `busy_until` (instants, or Busy) busy with earlier work until then. Within a tenant's
    queue, arrivals of the same instant start in list order (callers list probes, of duration
    0, after the runs they stand behind). Each
    arrival and each group of slots freed is a step of `budget`. Nothing starts after
    `until`: what is still waiting then never starts (infinitely late). With `watch` (a test
    of keys), the simulation ends once every arrival with a watched key has started; the
    lateness of the others is then incomplete. With `misses` ((objective, {key: runs})), it
    raises _Missed as soon as more runs of a key than that start later than the objective
    (a run never started counts too)."""
    busy = [b if isinstance(b, Busy) else Busy(b) for b in busy_until]
    claim = _Claim(slots, claimants, busy, start)
    lateness: dict[object, Lateness] = defaultdict(Lateness)
    ordered = sorted(arrivals, key=attrgetter("at"))  # stable: probes come after the runs they stand behind
    if not claim.slots:
        if misses is not None and ordered:
            raise _Missed
        for arrival in ordered:
            lateness[arrival.key].add(math.inf, arrival.count)
        return dict(lateness)
    if watch is not None:
        claim.watch, claim.watched = watch, sum(a.count for a in ordered if watch(a.key))
    if misses is not None:
        claim.objective, claim.misses = misses[0], dict(misses[1])
    now, i = start, 0
    while True:
        while i < len(ordered) and ordered[i].at <= now:
            claim.enqueue(ordered[i])
            i += 1
        claim.release(now)
        if claim.free:
            claim.serve(now, lateness)
        if claim.watch is not None and claim.watched <= 0:
            break
        upcoming = min(ordered[i].at if i < len(ordered) else math.inf, claim.heap[0] if claim.heap else math.inf)
        if upcoming == math.inf or upcoming > until:
            break
        now = max(now, upcoming)
        if budget is not None:
            budget.left -= 1
            if budget.left < 0:
                raise SimulationTooLong(now)
    for arrival in ordered[i:]:
        claim.enqueue(arrival)
    if claim.misses is not None and claim.waiting:
        raise _Missed  # what never starts is later than any objective
    claim.never(lateness)
    return dict(lateness)


def wave_lateness(arrivals: list[Arrival], slots: int, *, busy_until: list = ()) -> Lateness:
    """The lateness of all of `arrivals` together."""
    total = Lateness()
    for part in simulate(arrivals, slots, busy_until=busy_until).values():
        for seconds, count in part.counts.items():
            total.add(seconds, count)
    return total


def slots_needed(arrivals: list[Arrival], objective: float, *, percentile: float = 99,
                 busy_until: list = (), claimants: Claimants = FIRST_COME, budget: Steps | None = None,
                 until: float = math.inf) -> int:
    """The fewest slots with which the arrivals of every key start within `objective`
    seconds at `percentile`. Slots busy with earlier work (`busy_until`) come on top."""
    total = sum(a.count for a in arrivals)
    busy = len(busy_until)
    if not total:
        return busy

    totals: Counter = Counter()
    for a in arrivals:
        totals[a.key] += a.count
    # Runs of each key that may start later than the objective (p99 of 300: 3): one more fails it.
    misses = {key: n - max(1, math.ceil(percentile / 100 * n)) for key, n in totals.items()}

    def meets(slots: int) -> bool:
        try:
            simulate(arrivals, slots + busy, busy_until=busy_until, claimants=claimants, budget=budget, until=until,
                     misses=(objective, misses))
        except _Missed:
            return False
        return True

    # As many slots as runs would be running at once if each started at its instant start each
    # on time (more for the reserve: ordinary runs get only their share); never more than one each.
    high = min(total, math.ceil(concurrency(arrivals) / (1 - claimants.reserved_share)) + 1)
    return fewest(meets, low=1, high=high) + busy


def concurrency(arrivals: list[Arrival]) -> int:
    """The most runs of `arrivals` running at once, each from its instant for its duration."""
    changes: Counter = Counter()
    for a in arrivals:
        if a.duration > 0:
            changes[a.at] += a.count
            changes[a.at + a.duration] -= a.count
    running = most = 0
    for at in sorted(changes):
        running += changes[at]
        most = max(most, running)
    return most


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
