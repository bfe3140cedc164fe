"""Admission of strict start promises. A schedule with `startDeadlineSeconds` is admitted
only if the forecast says (1) its occurrences will start within that many seconds of their
due instant (`dueAt`: the nominal instant plus its jitter offset) at p99, served in the
claim's order (runs.capacity.waves: its tenant's weighted-fair share, strict runs first,
the reserved share; among its own tenant's strict runs due at the same instant it is served
last), and (2) it pushes no other strict schedule of its resource class that keeps its own
promise without it past that promise (`promises`).

Its instants are those the scanner will materialize (demand.proposed_rule): in its window
(activeFrom, activeUntil), under its calendars (a skipped day's instant drops out, a shifted
one moves), no more than its endAfterOccurrences leaves, as stored schedules are read.
Its own promise is checked over its instants in the next CAPACITY_ADMISSION_HORIZON_SECONDS
(at most MAX_CHECKED_INSTANTS, fewer when the range up to them is more than the budget
simulates), each at every offset its jitter may give it: that answer does not depend on the
schedule's id. The other promises meet its runs where they will really fall (the offsets its
id draws). The simulation covers the checked instants from WARM_UP_SECONDS (plus the
deadline) before the first of them, or from now.

No writer waits for the computation: admit_start_deadline runs outside any transaction and
returns an Admission, which the transaction writing the schedule confirms (Admission.confirm)
by moving its class's AdmissionEpoch from the value read before the forecast to the next.
Another strict admission of the class confirmed meanwhile moves it first: the forecast
missed that promise, and the service computes it again. Two promises
that fit alone but not together are thus never both admitted, while ordinary writes (and
every other tenant's) never touch the epoch. The work of one admission is bounded by
CAPACITY_ADMISSION_BUDGET."""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F

from kernel.clock import authority_now, instant as instant_text
from kernel.errors import DeadlineInfeasible
from runs.capacity import promises
from runs.capacity.demand import (
    Budget, DemandTooLarge, Source, occurrences_due, proposed_rule, rule_instants, source_due,
)
from runs.capacity.forecast import claimants, class_work
from runs.capacity.live import live_slots
from runs.capacity.statistics import job_type_durations, schedule_durations
from runs.capacity.waves import Arrival, Lateness, SimulationTooLong, Steps, fewest, simulate
from runs.models import AdmissionEpoch
from schedules.selectors import occurrences_left

MAX_CHECKED_INSTANTS = 100
JITTER_LADDER = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
PROBE = "probe"
PROBE_BUDGET = 5000  # probes per simulation over all instants checked; each instant gets at least 101
# What comes due this long (plus the deadline) before the first instant checked is simulated;
# what comes due earlier is not. In a class the schedules keep busy, the slots are full again
# within a run's duration of the warm-up's start, and another tenant's ordinary backlog
# changes nothing of a strict run's turn (its tenant's share, strict runs first): what
# is left out is strict work due before the warm-up and still waiting after it, which a kept
# promise does not leave.
WARM_UP_SECONDS = 600


@dataclass(frozen=True)
class Admission:
    """An admission's verdict, computed outside any transaction, for the one writing the
    schedule to confirm."""

    resource_class: str
    epoch: int  # the class's AdmissionEpoch when the forecast was read
    refusal: DeadlineInfeasible | None

    def confirm(self) -> bool:
        """Inside the writing transaction: raise the refusal; False if another strict promise
        of the class was admitted since the forecast (compute it again); else count this one.
        On PostgreSQL a concurrent confirmation of the class waits for this transaction (the
        epoch row's lock), then finds the epoch moved: strict admissions take turns only
        there, for the few statements left of the writing transaction."""
        if self.refusal is not None:
            raise self.refusal
        AdmissionEpoch.objects.bulk_create([AdmissionEpoch(resource_class=self.resource_class)], ignore_conflicts=True)
        return AdmissionEpoch.objects.filter(resource_class=self.resource_class, epoch=self.epoch).update(
            epoch=F("epoch") + 1) == 1


def admission_epoch(resource_class: str) -> int:
    return AdmissionEpoch.objects.filter(resource_class=resource_class).values_list("epoch", flat=True).first() or 0


def admit_start_deadline(*, schedule, job_type, payload: dict, rule) -> Admission | None:
    """The verdict on `schedule` as `payload` describes it: None for an ordinary schedule
    (nothing to check), else an Admission refusing it (DeadlineInfeasible) when it would miss
    its start deadline at p99 or push another strict schedule past its own. The schedule
    services call it (their `admit`) before their transaction, and confirm it inside."""
    deadline = payload.get("startDeadlineSeconds")
    if not deadline or rule.kind == "after_completion":
        return None
    rc = job_type.resource_class
    epoch = admission_epoch(rc)  # read before the forecast: an admission confirmed after it moves it
    return Admission(rc, epoch, _refusal(schedule, job_type, rule, payload.get("jitterSeconds") or 0, deadline))


def _refusal(schedule, job_type, rule, jitter: int, deadline: int) -> DeadlineInfeasible | None:
    most = MAX_CHECKED_INSTANTS
    while True:  # fewer instants (a shorter range to simulate) while the budget does not cover them
        steps = Steps(settings.CAPACITY_ADMISSION_BUDGET)
        try:
            check = _Check.read(schedule, job_type, rule, jitter, deadline, steps, most)
            if check is None:
                return None
            verdict = check.judge(jitter, check.slots)
            break
        except SimulationTooLong:
            if most == 1:
                return DeadlineInfeasible(
                    "the schedules due before this schedule's first instant make more occurrences than one "
                    "admission simulates; its promise cannot be checked", details={
                        "resourceClass": job_type.resource_class, "startDeadlineSeconds": deadline,
                        "budget": settings.CAPACITY_ADMISSION_BUDGET})
            most = max(1, most // 4)
    if verdict.admitted:
        return None
    # What would admit it, as far as the budget goes (null when it ran out first).
    suggested = _within(steps, lambda: next((j for j in JITTER_LADDER if j > jitter and check.admits(j, check.slots)),
                                            None))
    needed = _within(steps, lambda: fewest(lambda n: check.admits(jitter, n), low=check.slots + 1,
                                           high=max(check.slots + 1, check.total())))
    rc = job_type.resource_class
    if verdict.broken is None:
        message = (f"the {rc} slots cannot start this schedule within {deadline} s at p99 "
                   f"(predicted {_text(verdict.predicted)} s)")
    else:
        message = f"admitting it would make {verdict.broken.describe(schedule.tenant_id)}"
    return DeadlineInfeasible(message, details={
        "instant": instant_text(check.instants[verdict.worst]),
        "resourceClass": rc,
        "startDeadlineSeconds": deadline,
        "predictedP99Seconds": None if verdict.predicted == float("inf") else verdict.predicted,
        "liveSlots": check.slots,
        "slotsNeeded": needed,
        "suggestedJitterSeconds": suggested,
        "breaks": None if verdict.broken is None else verdict.broken.details(schedule.tenant_id),
    })


def _within(steps: Steps, compute):
    try:
        return compute()
    except SimulationTooLong:
        return None


@dataclass(frozen=True)
class _Verdict:
    predicted: float  # the candidate's own p99 start lateness
    worst: int  # the index of the checked instant it starts latest at
    broken: promises.Broken | None
    deadline: int

    @property
    def admitted(self) -> bool:
        return self.predicted <= self.deadline and self.broken is None


@dataclass
class _Check:
    """What one admission reads once and simulates again for each jitter and slot count it tries."""

    candidate: Source  # its duration: the seconds one of its runs is expected to take
    start: datetime
    end: datetime
    instants: list[datetime]  # the candidate's nominal instants checked
    deadline: int
    work: object  # the class's arrivals and busy slots, without the candidate
    slots: int
    claim: object  # the claim order's tenants and reserve
    protected: promises.Promises
    steps: Steps

    @classmethod
    def read(cls, schedule, job_type, rule, jitter: int, deadline: int, steps: Steps,
             most: int = MAX_CHECKED_INSTANTS) -> "_Check | None":
        now = authority_now()
        # Its instants as the scanner will materialize them: in its window, under its
        # calendars, and no more than its endAfterOccurrences leaves.
        rule = proposed_rule(schedule, rule)
        left = occurrences_left(schedule)
        if left == 0:
            return None
        instants = rule_instants(rule, now, now + timedelta(seconds=settings.CAPACITY_ADMISSION_HORIZON_SECONDS),
                                 most=most if left is None else min(most, left))
        if not instants:
            return None
        rc = job_type.resource_class
        # The simulation starts a warm-up before the first instant checked, or now.
        start = max(now, instants[0] - timedelta(seconds=WARM_UP_SECONDS + deadline))
        end = instants[-1] + timedelta(seconds=max(JITTER_LADDER) + 1)
        walk = Budget(steps.left)
        try:
            if left is not None:
                rule = _ending_after(rule, left, now, end, walk)
            # Only the candidate's class shares its slots: no other class's load is read.
            due = occurrences_due(start, end, exclude=schedule.id, durations=schedule_durations, budget=walk,
                                  resource_class=rc)
        except DemandTooLarge as error:
            raise SimulationTooLong(0.0) from error
        steps.spend(walk.walked)
        expected = job_type_durations({d.job_type for d in due} | {job_type.name})
        work = class_work(start, due, expected, None, under_way=start == now)[rc]
        slots = live_slots().get(rc, 0)
        own = schedule_durations([schedule.id]).get(schedule.id, expected[job_type.name])  # an edit's own history
        candidate = Source(schedule.id, schedule.tenant_id, job_type.name, rc, rule, jitter, own, strict=True)
        claim = claimants(work, schedule.tenant_id)
        protected = promises.Promises.read(rc, schedule.id, start, end, work, slots, claim, steps)
        return cls(candidate, start, end, instants, deadline, work, slots, claim, protected, steps)

    def load(self, jitter: int) -> list[Arrival]:
        """The candidate's own runs, at the offsets its id draws with `jitter`."""
        source = replace(self.candidate, jitter_seconds=jitter)
        return [Arrival(_offset(self.start, d.at), d.duration, d.count, None, source.tenant_id, True)
                for d in source_due(source, self.start, self.end)]

    def probes(self, jitter: int) -> list[Arrival]:
        """A zero-duration strict run of the candidate's tenant at each checked instant and each
        offset its jitter may give it (whichever schedule id draws them)."""
        offsets = _offsets(jitter, max(101, PROBE_BUDGET // len(self.instants)))
        return [Arrival(_offset(self.start, at) + offset, 0.0, 1, (PROBE, i), self.candidate.tenant_id, True)
                for i, at in enumerate(self.instants) for offset in offsets]

    def judge(self, jitter: int, slots: int) -> _Verdict:
        """One simulation with the candidate's runs: its own p99 over its probes (and the
        instant it starts latest at), and the promise it breaks."""
        arrivals = self.work.arrivals + self.load(jitter) + self.probes(jitter) + self.protected.probes
        lateness = simulate(arrivals, slots, busy_until=self.work.busy_until, claimants=self.claim, budget=self.steps,
                            until=self.protected.until(self.start, self.end, self.deadline), watch=_probe)
        overall, worst = Lateness(), {}
        for key, part in lateness.items():
            if isinstance(key, tuple) and key[0] == PROBE:
                worst[key[1]] = part.percentile(100)
                for seconds, count in part.counts.items():
                    overall.add(seconds, count)
        return _Verdict(overall.percentile(99), max(worst, key=lambda i: (worst[i], -i)),
                        self.protected.broken(lateness), self.deadline)

    def admits(self, jitter: int, slots: int) -> bool:
        return self.judge(jitter, slots).admitted

    def total(self) -> int:
        return sum(a.count for a in self.work.arrivals) + len(self.work.busy_until) + len(self.instants) + 1


def _ending_after(rule, left: int, now: datetime, end: datetime, budget: Budget):
    """`rule` ending at the last of the `left` instants from `now` on it may still
    materialize, when that one comes before `end` (the simulation's)."""
    remaining = rule_instants(rule, now, end, budget, most=left)
    if len(remaining) < left:
        return rule
    return rule.within(rule.active_from, remaining[-1])


def _probe(key) -> bool:
    """The simulation may end once every probe (the candidate's and the promises') has started."""
    return isinstance(key, tuple)


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
