"""The strict promises an admission must keep: every live strict schedule of the candidate's
resource class (startDeadlineSeconds, a rule of its own instants, not paused) whose
occurrences in the checked range start within its deadline at p99 without the candidate.
Each occurrence is a zero-duration probe at its real due instant (its own jitter offset),
served last among the runs due at the same time (as it was when it was admitted); the
candidate breaks a promise when, with its runs added, that schedule's p99 passes its
deadline."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from runs.capacity.demand import Source, occurrence_instants, strict_schedules
from runs.capacity.waves import Arrival, Lateness, simulate
from scheduler_project.clock import instant as instant_text

PROMISE = "promise"
MAX_INSTANTS_PER_PROMISE = 100
MAX_PROBES = 20_000  # occurrences of other strict schedules checked per simulation, earliest schedules first


@dataclass(frozen=True)
class Kept:
    source: Source
    deadline: int
    occurrences: list[tuple[datetime, float]]  # (nominal instant, due instant on the range's clock)


@dataclass(frozen=True)
class Broken:
    """A strict schedule the candidate would push past its promise, at its worst instant."""

    schedule_id: str
    tenant_id: str
    instant: datetime
    deadline: int
    predicted: float

    def describe(self, tenant_id: str) -> str:
        whose = f"strict schedule {self.schedule_id}" if tenant_id == self.tenant_id else \
            "a strict schedule of another tenant"
        return (f"{whose} start later than its {self.deadline} s deadline at p99 (predicted {self.predicted:g} s "
                f"for {instant_text(self.instant)})")

    def details(self, tenant_id: str) -> dict:
        """Another tenant's schedule is never named: its id stays null."""
        return {"scheduleId": self.schedule_id if tenant_id == self.tenant_id else None,
                "instant": instant_text(self.instant), "startDeadlineSeconds": self.deadline,
                "predictedP99Seconds": self.predicted}


class Promises:
    def __init__(self, kept: list[Kept]):
        self.kept = kept
        self.probes = [Arrival(at, 0.0, 1, (PROMISE, k, i))
                       for k, promise in enumerate(kept) for i, (_, at) in enumerate(promise.occurrences)]

    @classmethod
    def read(cls, resource_class: str, exclude: str, start: datetime, end: datetime, work, slots: int) -> "Promises":
        """The promises of the class kept in [start, end) on `slots` without the candidate
        (`work`: the class's arrivals and busy slots without it)."""
        found, used = [], 0
        for source, first, deadline in strict_schedules(resource_class, exclude=exclude, before=end):
            pairs = occurrence_instants(source, start, end, first)[:MAX_INSTANTS_PER_PROMISE]
            if used + len(pairs) > MAX_PROBES:
                break
            if pairs:
                found.append(Kept(source, deadline, [(nominal, (due - start).total_seconds()) for nominal, due in pairs]))
                used += len(pairs)
        p99s = cls(found)._p99s(work.arrivals, work.busy_until, slots)
        return cls([promise for k, promise in enumerate(found) if k in p99s and p99s[k][0] <= promise.deadline])

    def broken(self, work, load: list[Arrival], slots: int) -> Broken | None:
        """The promise the candidate's `load` breaks by the most seconds (then the earliest
        schedule id), or None."""
        found = []
        for k, (p99, worst) in self._p99s(work.arrivals + load, work.busy_until, slots).items():
            kept = self.kept[k]
            if p99 > kept.deadline:
                found.append(Broken(kept.source.schedule_id, kept.source.tenant_id, kept.occurrences[worst][0],
                                    kept.deadline, p99))
        return min(found, key=lambda b: (b.deadline - b.predicted, b.schedule_id), default=None)

    def _p99s(self, arrivals: list[Arrival], busy_until: list[float], slots: int) -> dict[int, tuple[float, int]]:
        """{promise index: (p99 start lateness of its probes, index of its latest occurrence)}."""
        if not self.probes:
            return {}
        lateness = simulate(arrivals + self.probes, slots, busy_until=busy_until)
        overall, worst = defaultdict(Lateness), {}
        for key, part in lateness.items():
            if isinstance(key, tuple) and key[0] == PROMISE:
                _, k, i = key
                seconds = part.percentile(100)
                overall[k].add(seconds, part.total)
                worst[k] = max(worst.get(k, (seconds, -i)), (seconds, -i))
        return {k: (overall[k].percentile(99), -worst[k][1]) for k in overall}
