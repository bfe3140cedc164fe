"""The strict promises an admission must keep: every live strict schedule of the candidate's
resource class (startDeadlineSeconds, a rule of its own instants, not paused) whose
occurrences in the checked range start within its deadline at p99 without the candidate.
Each occurrence is a zero-duration probe: a strict run of its tenant at its real due instant
(its own jitter offset), served in the claim's order and last among its tenant's strict runs
due at the same time; the candidate breaks a promise when, with its runs added, that
schedule's p99 passes its deadline."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from runs.capacity.demand import Source, occurrence_instants, strict_schedules
from runs.capacity.waves import Arrival, Lateness, Steps, simulate
from kernel.clock import instant as instant_text

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


def _promise(key) -> bool:
    return isinstance(key, tuple) and key[0] == PROMISE


class Promises:
    """The promises of a class in a range, and the simulation without the candidate that says
    which of them are kept without it (run only when one looks broken with it)."""

    def __init__(self, found: list[Kept], baseline=None):
        self.found = found
        self.probes = [Arrival(at, 0.0, 1, (PROMISE, k, i), promise.source.tenant_id, True)
                       for k, promise in enumerate(found) for i, (_, at) in enumerate(promise.occurrences)]
        self._baseline = baseline  # () -> the lateness per key without the candidate
        self._kept: set[int] | None = None

    @classmethod
    def read(cls, resource_class: str, exclude: str, start: datetime, end: datetime, work, slots: int,
             claim, steps: Steps) -> "Promises":
        """The promises of the class in [start, end), to be kept on `slots` where they are
        kept without the candidate (`work`: the class's arrivals and busy slots without it,
        whose tenants `claim` holds: every promise's runs are among them)."""
        found, used = [], 0
        for source, first, deadline in strict_schedules(resource_class, exclude=exclude, before=end):
            pairs = occurrence_instants(source, start, end, first, most=MAX_INSTANTS_PER_PROMISE)
            if used + len(pairs) > MAX_PROBES:
                break
            if pairs:
                found.append(Kept(source, deadline, [(nominal, (due - start).total_seconds()) for nominal, due in pairs]))
                used += len(pairs)
        promises = cls(found)
        promises._baseline = lambda: simulate(work.arrivals + promises.probes, slots, busy_until=work.busy_until,
                                              claimants=claim, budget=steps, until=promises.until(start, end),
                                              watch=_promise)
        return promises

    def kept(self) -> set[int]:
        """The indexes of the promises kept without the candidate."""
        if self._kept is None:
            p99s = self._p99s(self._baseline()) if self.probes else {}
            self._kept = {k for k, (p99, _) in p99s.items() if p99 <= self.found[k].deadline}
        return self._kept

    def until(self, start: datetime, end: datetime, deadline: int = 0) -> float:
        """How long a simulation of the range must go on: a probe not started by then has
        missed its deadline (and `deadline`, the candidate's) anyway."""
        return (end - start).total_seconds() + max([deadline, *(promise.deadline for promise in self.found)]) + 1

    def broken(self, lateness: dict) -> Broken | None:
        """The promise kept without the candidate that a simulation with it (`lateness` per
        key, with `probes`) breaks by the most seconds (then the earliest schedule id), or None."""
        found = []
        for k, (p99, worst) in self._p99s(lateness).items():
            promise = self.found[k]
            if p99 > promise.deadline and k in self.kept():
                found.append(Broken(promise.source.schedule_id, promise.source.tenant_id,
                                    promise.occurrences[worst][0], promise.deadline, p99))
        return min(found, key=lambda b: (b.deadline - b.predicted, b.schedule_id), default=None)

    def _p99s(self, lateness: dict) -> dict[int, tuple[float, int]]:
        """{promise index: (p99 start lateness of its probes, index of its latest occurrence)}."""
        overall, worst = defaultdict(Lateness), {}
        for key, part in lateness.items():
            if isinstance(key, tuple) and key[0] == PROMISE:
                _, k, i = key
                seconds = part.percentile(100)
                overall[k].add(seconds, part.total)
                worst[k] = max(worst.get(k, (seconds, -i)), (seconds, -i))
        return {k: (overall[k].percentile(99), -worst[k][1]) for k in overall}
