"""The capacity forecast: per minute and resource class, the occurrences the rules make due,
the slot-seconds they are expected to take, the live slots, and the start lateness
(p50/p99) a queue simulation of the waves against those slots predicts, in the order the
claim serves them (runs.capacity.waves). The simulation runs through the whole range, so a
minute's wave meets the work earlier minutes left behind, and it starts with the slots busy
with running work and the claimable backlog. A run is expected to take its schedule's own
mean where the schedule has enough history (statistics.schedule_durations), else its job
type's.

Its cost is bounded: the instants walked (demand) and the simulation's steps share one
budget, CAPACITY_FORECAST_BUDGET; a range that needs more raises ForecastTooLarge (the API
answers 400: ask for a shorter range)."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings

from runs.capacity.demand import Budget, DemandTooLarge, Due, occurrences_due
from runs.capacity.live import capacity_by_class
from runs.capacity.statistics import job_type_durations, schedule_durations
from runs.capacity.waves import Arrival, Busy, Claimants, Lateness, SimulationTooLong, Steps, simulate, slots_needed
from runs.models import Run, RunState
from schedules.models import Tenant
from kernel.clock import authority_now

MINUTE = 60
# The simulation goes on this long after the range: a run due in the range that has not
# started by then is reported as never starting (its lateness null, the minute infeasible).
DRAIN_SECONDS = 3600


class ForecastTooLarge(Exception):
    """The range needs more work than one forecast may do (CAPACITY_FORECAST_BUDGET)."""


@dataclass
class MinuteRow:
    minute: datetime
    resource_class: str
    due: int = 0
    slot_seconds: float = 0.0
    lateness: Lateness = field(default_factory=Lateness)
    slots_needed: int | None = None

    def p(self, q: float) -> float | None:
        return self.lateness.percentile(q)


@dataclass
class Forecast:
    start: datetime
    end: datetime
    objective: float
    capacity: dict  # class -> live, busy, free slots, processes
    rows: list[MinuteRow]
    required: dict  # class -> fewest slots with which every minute meets the objective


class _Work:
    """The arrivals and busy slots of one resource class, on the range's clock (seconds after start)."""

    def __init__(self):
        self.arrivals: list[Arrival] = []
        self.busy_until: list[Busy] = []


def forecast(start: datetime, end: datetime, *, tenant_id: str | None = None, classes=None,
             objective: float | None = None, required: bool = True, budget: int | None = None) -> Forecast:
    """The forecast of [start, end); with `tenant_id`, the rows describe only that tenant's
    occurrences (competing with everyone's for the same slots). `required`: the slots every
    minute needs (the class's and each infeasible minute's)."""
    objective = float(settings.CAPACITY_OBJECTIVE_SECONDS if objective is None else objective)
    steps = Steps(settings.CAPACITY_FORECAST_BUDGET if budget is None else budget)
    with _bounded(start, end):
        work = range_work(start, end, tenant_id, steps)
        capacity = capacity_by_class()
        rows, needed = [], {}
        for rc, part in sorted(work.items()):
            if classes and rc not in classes:
                continue
            slots = capacity.get(rc, {}).get("liveSlots", 0)
            claim = claimants(part)
            lateness = simulate(part.arrivals, slots, busy_until=part.busy_until, claimants=claim, budget=steps,
                                until=_until(start, end))
            rows.extend(_rows(start, rc, part, lateness, objective, claim, steps if required else None))
            if required:
                needed[rc] = _required(part, objective, claim, steps, _until(start, end))
    rows.sort(key=lambda r: (r.minute, r.resource_class))
    return Forecast(start, end, objective, capacity, rows, needed)


def lateness_by_tenant(start: datetime, end: datetime, *, budget: int | None = None) -> dict:
    """{(class, minute index after `start`, tenant id, strict): Lateness}: the same simulation
    as `forecast`'s (everyone's occurrences, the live slots, the work under way), its start
    lateness told apart per tenant and strictness within each minute's wave: the claim serves
    tenants by fair share and strict runs first, so one tenant's share of a wave may start on
    time while another's is late. Within one tenant, strictness and instant the claim serves
    runs by id, minted at materialization: which of them a schedule's run will be is not
    known before, so that group's lateness is the finest a schedule's own can be told."""
    steps = Steps(settings.CAPACITY_FORECAST_BUDGET if budget is None else budget)
    found = {}
    with _bounded(start, end):
        work = range_work(start, end, None, steps)
        capacity = capacity_by_class()
        for rc, part in sorted(work.items()):
            arrivals = [arrival if arrival.key is None else replace(
                arrival, key=(arrival.key, arrival.tenant, arrival.strict)) for arrival in part.arrivals]
            lateness = simulate(arrivals, capacity.get(rc, {}).get("liveSlots", 0), busy_until=part.busy_until,
                                claimants=claimants(part), budget=steps, until=_until(start, end))
            found.update(((rc, *key), value) for key, value in lateness.items() if key is not None)
    return found


def required_slots(start: datetime, end: datetime, *, objective: float | None = None) -> dict[str, int]:
    """{class: the fewest slots with which every minute of [start, end) meets the objective}:
    the forecast's `required` alone, without simulating the live slots minute by minute."""
    objective = float(settings.CAPACITY_OBJECTIVE_SECONDS if objective is None else objective)
    steps = Steps(settings.CAPACITY_FORECAST_BUDGET)
    with _bounded(start, end):
        return {rc: _required(part, objective, claimants(part), steps, _until(start, end))
                for rc, part in range_work(start, end, None, steps).items()}


def _until(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds() + DRAIN_SECONDS


class _bounded:
    """Turns running out of the budget into ForecastTooLarge."""

    def __init__(self, start: datetime, end: datetime):
        self.start, self.end = start, end

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if isinstance(error, (SimulationTooLong, DemandTooLarge)):
            raise ForecastTooLarge(f"forecasting {self.start}..{self.end} takes more than the budget") from None
        return False


def _required(part: "_Work", objective: float, claim: Claimants, steps, until: float) -> int:
    """The fewest slots with which every minute of the range meets the objective (the backlog
    and the busy slots competing; the slots busy with running work on top)."""
    return slots_needed([a for a in part.arrivals if a.key is not None], objective, busy_until=part.busy_until,
                        claimants=claim, budget=steps, until=until)


def range_work(start: datetime, end: datetime, tenant_id: str | None, steps=None) -> dict[str, "_Work"]:
    """Each class's arrivals in [start, end) and busy slots, each run with its expected duration."""
    walk = Budget(None if steps is None else steps.left)
    due = occurrences_due(start, end, durations=schedule_durations, budget=walk)
    if steps is not None:
        steps.spend(walk.walked)
    expected = job_type_durations({d.job_type for d in due} | _running_job_types())
    return class_work(start, due, expected, tenant_id)



def _running_job_types() -> set[str]:
    return set(Run.objects.filter(state=RunState.RUNNING).values_list("job_type", flat=True).distinct())


def claimants(part: "_Work", *more: str) -> Claimants:
    """The claim order's parameters for the tenants of `part` (and `more`): their weights and
    active-run limits, and the share of the slots reserved for strict runs."""
    ids = {a.tenant for a in part.arrivals} | {b.tenant for b in part.busy_until} | set(more)
    rows = Tenant.objects.filter(id__in=[i for i in ids if i]).values_list("id", "weight", "max_active_runs")
    return Claimants({tenant: (weight, limit) for tenant, weight, limit in rows}, settings.STRICT_RESERVED_SHARE)


def class_work(start, due: list[Due], expected: dict, tenant_id, *, under_way: bool = True) -> dict[str, _Work]:
    """`due` and (with `under_way`: the range starts now) the runs under way (running: busy
    slots; queued and overdue: the backlog) as each class's arrivals and busy slots, each run
    expected to take its schedule's own mean (schedule_durations) or its job type's, each of
    its tenant and strict or not."""
    work: dict[str, _Work] = defaultdict(_Work)
    arrivals: dict[str, Counter] = defaultdict(Counter)  # alike occurrences travel as one arrival
    for d in due:
        offset = (d.at - start).total_seconds()
        mine = tenant_id is None or d.tenant_id == tenant_id
        key = int(offset // MINUTE) if mine else None
        duration = d.duration if d.duration is not None else expected[d.job_type]
        arrivals[d.resource_class][offset, duration, key, d.tenant_id, d.strict] += d.count
    for rc, counts in arrivals.items():
        work[rc].arrivals.extend(Arrival(at, duration, n, key, tenant, strict)
                                 for (at, duration, key, tenant, strict), n in counts.items())
    if not under_way:
        return work
    now = authority_now()
    running = list(Run.objects.filter(state=RunState.RUNNING).values_list(
        "resource_class", "job_type", "schedule_id", "started_at", "tenant_id", "strict"))
    backlog = list(Run.objects.filter(state=RunState.QUEUED, due_at__lt=start).values_list(
        "resource_class", "job_type", "schedule_id", "tenant_id", "strict")[:100_000])
    own = schedule_durations({row[2] for row in running} | {row[2] for row in backlog})
    default = float(settings.CAPACITY_DEFAULT_DURATION_SECONDS)
    for rc, job_type, schedule_id, started_at, tenant, strict in running:
        ends = started_at + timedelta(seconds=own.get(schedule_id, expected.get(job_type, default)))
        work[rc].busy_until.append(Busy(max(ends, now).timestamp() - start.timestamp(), tenant, strict))
    waiting: dict[str, Counter] = defaultdict(Counter)
    for rc, job_type, schedule_id, tenant, strict in backlog:
        waiting[rc][own.get(schedule_id, expected.get(job_type, default)), tenant, strict] += 1
    at = min(0.0, (now - start).total_seconds())
    for rc, counts in waiting.items():
        work[rc].arrivals.extend(Arrival(at, duration, n, None, tenant, strict)
                                 for (duration, tenant, strict), n in counts.items())
    return work


def _rows(start, rc: str, part: _Work, lateness: dict, objective: float, claim: Claimants, steps) -> list[MinuteRow]:
    """The minute rows; with `steps` (a budget), each infeasible minute's slots needed."""
    rows: dict[int, MinuteRow] = {}
    minute_arrivals: dict[int, list[Arrival]] = defaultdict(list)
    for arrival in part.arrivals:
        if arrival.key is None:
            continue
        index = arrival.key
        row = rows.get(index)
        if row is None:
            row = rows[index] = MinuteRow(start + timedelta(seconds=index * MINUTE), rc)
        row.due += arrival.count
        row.slot_seconds += arrival.count * arrival.duration
        minute_arrivals[index].append(arrival)
    for key, part_lateness in lateness.items():
        if key is not None:
            rows[key].lateness = part_lateness
    if steps is None:
        return list(rows.values())
    needs: dict[tuple, int] = {}  # alike waves (every minute of a steady load) are computed once
    for index, row in rows.items():
        late = row.p(99)
        if late is None or late > objective:
            # The minute's own wave, alone: the slots it needs however the rest goes.
            base = index * MINUTE
            alone = tuple(sorted((a.at - base, a.duration, a.count, a.tenant or "", a.strict)
                                 for a in minute_arrivals[index]))
            if alone not in needs:
                needs[alone] = slots_needed([Arrival(at, duration, n, "minute", tenant or None, strict)
                                             for at, duration, n, tenant, strict in alone],
                                            objective, claimants=claim, budget=steps)
            row.slots_needed = needs[alone]
    return list(rows.values())
