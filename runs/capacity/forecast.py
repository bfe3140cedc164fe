"""The capacity forecast: per minute and resource class, the occurrences the rules make due,
the slot-seconds they are expected to take, the live slots, and the start lateness
(p50/p99) a queue simulation of the waves against those slots predicts. The simulation runs
through the whole range, so a minute's wave meets the work earlier minutes left behind,
and it starts with the slots busy with running work and the claimable backlog. A run is
expected to take its schedule's own mean where the schedule has enough history
(statistics.schedule_durations), else its job type's."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from runs.capacity.demand import Due, occurrences_due
from runs.capacity.live import capacity_by_class
from runs.capacity.statistics import runtime_statistics, schedule_durations
from runs.capacity.waves import Arrival, Lateness, simulate, slots_needed
from runs.models import Run, RunState
from scheduler_project.clock import authority_now

MINUTE = 60


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
        self.busy_until: list[float] = []


def forecast(start: datetime, end: datetime, *, tenant_id: str | None = None, classes=None,
             objective: float | None = None, required: bool = True) -> Forecast:
    """The forecast of [start, end); with `tenant_id`, the rows describe only that tenant's
    occurrences (competing with everyone's for the same slots)."""
    objective = float(settings.CAPACITY_OBJECTIVE_SECONDS if objective is None else objective)
    work = range_work(start, end, tenant_id)
    capacity = capacity_by_class()
    rows, needed = [], {}
    for rc, part in sorted(work.items()):
        if classes and rc not in classes:
            continue
        slots = capacity.get(rc, {}).get("liveSlots", 0)
        lateness = simulate(part.arrivals, slots, busy_until=part.busy_until)
        rows.extend(_rows(start, rc, part, lateness, objective))
        if required:
            needed[rc] = _required(part, objective)
    rows.sort(key=lambda r: (r.minute, r.resource_class))
    return Forecast(start, end, objective, capacity, rows, needed)


def required_slots(start: datetime, end: datetime, *, objective: float | None = None) -> dict[str, int]:
    """{class: the fewest slots with which every minute of [start, end) meets the objective}:
    the forecast's `required` alone, without simulating the live slots minute by minute."""
    objective = float(settings.CAPACITY_OBJECTIVE_SECONDS if objective is None else objective)
    return {rc: _required(part, objective) for rc, part in range_work(start, end, None).items()}


def _required(part: "_Work", objective: float) -> int:
    """The fewest slots with which every minute of the range meets the objective (the backlog
    and the busy slots competing; the slots busy with running work on top)."""
    return slots_needed([a for a in part.arrivals if a.key is not None], objective, busy_until=part.busy_until)


def range_work(start: datetime, end: datetime, tenant_id: str | None) -> dict[str, "_Work"]:
    """Each class's arrivals in [start, end) and busy slots, each run with its expected duration."""
    due = occurrences_due(start, end, durations=schedule_durations)
    expected = expected_durations({d.job_type for d in due} | _running_job_types())
    return class_work(start, due, expected, tenant_id)


def expected_durations(job_types) -> dict[str, float]:
    return {name: stats.expected_duration() for name, stats in runtime_statistics(sorted(job_types)).items()}


def _running_job_types() -> set[str]:
    return set(Run.objects.filter(state=RunState.RUNNING).values_list("job_type", flat=True).distinct())


def class_work(start, due: list[Due], expected: dict, tenant_id) -> dict[str, _Work]:
    """`due` and the runs under way (running: busy slots; queued and overdue: the backlog) as
    each class's arrivals and busy slots, each run expected to take its schedule's own mean
    (schedule_durations) or its job type's."""
    work: dict[str, _Work] = defaultdict(_Work)
    arrivals: dict[str, Counter] = defaultdict(Counter)  # alike occurrences travel as one arrival
    for d in due:
        offset = (d.at - start).total_seconds()
        mine = tenant_id is None or d.tenant_id == tenant_id
        key = int(offset // MINUTE) if mine else None
        duration = d.duration if d.duration is not None else expected[d.job_type]
        arrivals[d.resource_class][offset, duration, key] += d.count
    for rc, counts in arrivals.items():
        work[rc].arrivals.extend(Arrival(at, duration, n, key) for (at, duration, key), n in counts.items())
    now = authority_now()
    running = list(Run.objects.filter(state=RunState.RUNNING).values_list(
        "resource_class", "job_type", "schedule_id", "started_at"))
    backlog = list(Run.objects.filter(state=RunState.QUEUED, due_at__lt=start).values_list(
        "resource_class", "job_type", "schedule_id")[:100_000])
    own = schedule_durations({row[2] for row in running} | {row[2] for row in backlog})
    default = float(settings.CAPACITY_DEFAULT_DURATION_SECONDS)
    for rc, job_type, schedule_id, started_at in running:
        ends = started_at + timedelta(seconds=own.get(schedule_id, expected.get(job_type, default)))
        work[rc].busy_until.append(max(ends, now).timestamp() - start.timestamp())
    for rc, job_type, schedule_id in backlog:
        duration = own.get(schedule_id, expected.get(job_type, default))
        work[rc].arrivals.append(Arrival(min(0.0, (now - start).total_seconds()), duration, 1, None))
    return work


def _rows(start, rc: str, part: _Work, lateness: dict, objective: float) -> list[MinuteRow]:
    rows: dict[int, MinuteRow] = {}
    minute_arrivals: dict[int, list[Arrival]] = defaultdict(list)
    for arrival in part.arrivals:
        if arrival.key is None:
            continue
        index = arrival.key
        row = rows.setdefault(index, MinuteRow(start + timedelta(seconds=index * MINUTE), rc))
        row.due += arrival.count
        row.slot_seconds += arrival.count * arrival.duration
        minute_arrivals[index].append(arrival)
    for key, part_lateness in lateness.items():
        if key is not None:
            rows[key].lateness = part_lateness
    for index, row in rows.items():
        late = row.p(99)
        if late is None or late > objective:
            # The minute's own wave, alone: the slots it needs however the rest goes.
            alone = [Arrival(a.at, a.duration, a.count, "minute") for a in minute_arrivals[index]]
            row.slots_needed = slots_needed(alone, objective)
    return list(rows.values())
