"""Admission of strict start promises. A schedule with `startDeadlineSeconds` is admitted
only if the forecast says (1) its occurrences will start within that many seconds of their
due instant (`dueAt`: the nominal instant plus its jitter offset) at p99, queued behind
everything else due at the same time (the conservative order: among simultaneous arrivals
it is served last), and (2) it pushes no other strict schedule of its resource class that
keeps its own promise without it past that promise (`promises.broken`).

Its own promise is checked over its instants in the next CAPACITY_ADMISSION_HORIZON_SECONDS
(at most MAX_CHECKED_INSTANTS), each at every offset its jitter may give it: that answer does
not depend on the schedule's id. The other promises meet its runs where they will really
fall (the offsets its id draws)."""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from runs.capacity import promises
from runs.capacity.demand import Source, occurrences_due, rule_instants, source_due
from runs.capacity.forecast import class_work, expected_durations
from runs.capacity.live import live_slots
from runs.capacity.statistics import schedule_durations
from runs.capacity.waves import Arrival, Lateness, fewest, simulate
from scheduler_project.clock import authority_now, instant as instant_text
from scheduler_project.errors import DeadlineInfeasible

ADMISSION_LOCK_SPACE = 17_002  # first key of pg_advisory_xact_lock(int, int); the reserve's is 17_001
MAX_CHECKED_INSTANTS = 100
JITTER_LADDER = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
PROBE = "probe"
PROBE_BUDGET = 5000  # probes per simulation over all instants checked; each instant gets at least 101


def admit_start_deadline(*, schedule, job_type, payload: dict, rule) -> None:
    """Raise DeadlineInfeasible when `schedule` as `payload` describes it would miss its
    start deadline at p99, or push another strict schedule past its own; nothing to check for
    an ordinary schedule. The schedule services call it (their `admit`) under their lock,
    before anything is written; strict admissions of every tenant take turns
    (serialize_admissions) until the caller's transaction ends."""
    deadline = payload.get("startDeadlineSeconds")
    if not deadline or rule.kind == "after_completion":
        return
    jitter = payload.get("jitterSeconds") or 0
    serialize_admissions()
    check = _Check.read(schedule, job_type, rule, jitter, deadline)
    if check is None:
        return
    predicted, worst = check.own_p99(jitter, check.slots)
    broken = check.broken(jitter, check.slots) if predicted <= deadline else None
    if predicted <= deadline and broken is None:
        return
    suggested = next((j for j in JITTER_LADDER if j > jitter and check.admits(j, check.slots)), None)
    needed = fewest(lambda n: check.admits(jitter, n), low=check.slots + 1, high=max(check.slots + 1, check.total()))
    rc = job_type.resource_class
    if broken is None:
        message = f"the {rc} slots cannot start this schedule within {deadline} s at p99 (predicted {_text(predicted)} s)"
    else:
        message = f"admitting it would make {broken.describe(schedule.tenant_id)}"
    raise DeadlineInfeasible(message, details={
        "instant": instant_text(check.instants[worst]),
        "resourceClass": rc,
        "startDeadlineSeconds": deadline,
        "predictedP99Seconds": None if predicted == float("inf") else predicted,
        "liveSlots": check.slots,
        "slotsNeeded": needed,
        "suggestedJitterSeconds": suggested,
        "breaks": None if broken is None else broken.details(schedule.tenant_id),
    })


@dataclass
class _Check:
    """What one admission reads once (under the admission lock) and simulates again for each
    jitter and slot count it tries."""

    candidate: Source  # its duration: the seconds one of its runs is expected to take
    start: datetime
    end: datetime
    instants: list[datetime]  # the candidate's nominal instants checked
    deadline: int
    work: object  # the class's arrivals and busy slots, without the candidate
    slots: int
    protected: promises.Promises

    @classmethod
    def read(cls, schedule, job_type, rule, jitter: int, deadline: int) -> "_Check | None":
        start = authority_now()
        instants = rule_instants(rule, start, start + timedelta(seconds=settings.CAPACITY_ADMISSION_HORIZON_SECONDS))
        instants = instants[:MAX_CHECKED_INSTANTS]
        if not instants:
            return None
        rc = job_type.resource_class
        end = instants[-1] + timedelta(seconds=max(JITTER_LADDER) + 1)
        due = [d for d in occurrences_due(start, end, exclude=schedule.id, durations=schedule_durations)
               if d.resource_class == rc]
        expected = expected_durations({d.job_type for d in due} | {job_type.name})
        work = class_work(start, due, expected, None)[rc]
        slots = live_slots().get(rc, 0)
        own = schedule_durations([schedule.id]).get(schedule.id, expected[job_type.name])  # an edit's own history
        candidate = Source(schedule.id, schedule.tenant_id, job_type.name, rc, rule, jitter, own)
        protected = promises.Promises.read(rc, schedule.id, start, end, work, slots)
        return cls(candidate, start, end, instants, deadline, work, slots, protected)

    def load(self, jitter: int) -> list[Arrival]:
        """The candidate's own runs, at the offsets its id draws with `jitter`."""
        source = replace(self.candidate, jitter_seconds=jitter)
        return [Arrival(_offset(self.start, d.at), d.duration, d.count) for d in source_due(source, self.start, self.end)]

    def own_p99(self, jitter: int, slots: int) -> tuple[float, int]:
        """The p99 start lateness over its instants and the offsets its jitter may give them
        (whichever schedule id draws them), and the index of the instant of the worst start."""
        offsets = _offsets(jitter, max(101, PROBE_BUDGET // len(self.instants)))
        probes = [Arrival(_offset(self.start, at) + offset, 0.0, 1, (PROBE, i))
                  for i, at in enumerate(self.instants) for offset in offsets]
        lateness = simulate(self.work.arrivals + self.load(jitter) + probes, slots, busy_until=self.work.busy_until)
        overall, worst = Lateness(), {}
        for key, part in lateness.items():
            if isinstance(key, tuple):
                worst[key[1]] = part.percentile(100)
                for seconds, count in part.counts.items():
                    overall.add(seconds, count)
        return overall.percentile(99), max(worst, key=lambda i: (worst[i], -i))

    def broken(self, jitter: int, slots: int):
        """The other strict promise the candidate would break, or None."""
        return self.protected.broken(self.work, self.load(jitter), slots)

    def admits(self, jitter: int, slots: int) -> bool:
        return self.own_p99(jitter, slots)[0] <= self.deadline and self.broken(jitter, slots) is None

    def total(self) -> int:
        return sum(a.count for a in self.work.arrivals) + len(self.work.busy_until) + len(self.instants) + 1


def serialize_admissions() -> None:
    """Strict admissions take turns across every tenant, until the admitting transaction ends:
    the forecast read next sees every strict schedule admitted before (committed), so two
    promises that each fit alone but not together are never both admitted. A transaction-level
    advisory lock: safe behind PgBouncer's transaction pooling. Taken after the service's
    tenant or schedule lock; nothing holding it waits for a tenant or schedule lock."""
    if connection.vendor == "postgresql":  # the embedded SQLite has one writer at a time
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [ADMISSION_LOCK_SPACE])


def _offsets(jitter_seconds: int, most: int) -> list[int]:
    """Offsets in [0, jitter_seconds] standing for all of them (the hash draws each whole
    second alike): every one, or `most` evenly spread."""
    if jitter_seconds < most:
        return list(range(jitter_seconds + 1))
    step = jitter_seconds / (most - 1)
    return [round(k * step) for k in range(most)]


def _offset(start, at) -> float:
    return (at - start).total_seconds()


def _text(seconds: float) -> str:
    return "never (no live slots)" if seconds == float("inf") else f"{seconds:g}"
