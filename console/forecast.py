"""The next 24 hours: occurrences due per minute per resource class, computed from the
schedules' rules (nothing is materialized), plus occurrences already materialized and
waiting for their due time; and what runs.capacity forecasts for them: the live slots per
class and the start lateness p99 per minute its wave simulation predicts."""

import bisect
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from runs.capacity.forecast import forecast as capacity_forecast
from runs.models import PendingReason, Run, RunState
from schedules import recurrence
from schedules.models import Schedule

HORIZON = timedelta(hours=24)
MINUTES = 24 * 60
# The most instants one rule contributes: an every-second rule stops here.
PER_SCHEDULE_LIMIT = 24 * 3600


@dataclass
class Forecast:
    start: datetime  # the first minute (whole minute, UTC)
    per_class: dict[str, list[int]] = field(default_factory=dict)

    def add(self, resource_class: str, instant: datetime, count: int = 1) -> None:
        minute = int((instant - self.start).total_seconds() // 60)
        if 0 <= minute < MINUTES:
            self.per_class.setdefault(resource_class, [0] * MINUTES)[minute] += count

    def totals(self) -> list[int]:
        return [sum(column) for column in zip(*self.per_class.values())] or [0] * MINUTES

    def total(self) -> int:
        return sum(self.totals())


@dataclass
class Capacity:
    live_slots: dict[str, int]  # class -> slots of live worker reports, now
    p99: dict[str, dict[int, float]]  # class -> minute index -> predicted seconds (inf: never starts)
    objective: float


def capacity_next_24_hours(start: datetime) -> Capacity:
    """The capacity forecast (as GET /api/v1/capacity/forecast) of the 24 hours from `start`."""
    result = capacity_forecast(start, start + HORIZON, required=False)
    p99: dict[str, dict[int, float]] = {}
    for row in result.rows:
        late = row.p(99)
        if late is not None:
            p99.setdefault(row.resource_class, {})[int((row.minute - start).total_seconds() // 60)] = late
    return Capacity({rc: c["liveSlots"] for rc, c in result.capacity.items()}, p99, result.objective)


def next_24_hours(now: datetime) -> Forecast:
    start = now.replace(second=0, microsecond=0)
    forecast = Forecast(start=start)
    end = start + HORIZON - timedelta(microseconds=1)
    schedules = (
        Schedule.objects.filter(next_run_at__isnull=False, next_run_at__lte=end, deleted_at__isnull=True)
        .values_list("recurrence", "next_run_at", "job_type__resource_class")
    )
    # Schedules sharing a rule (the 09:00 wave) share its instants: each rule is walked once.
    groups: dict[tuple[str, str], list[datetime]] = {}
    for rule, next_run_at, resource_class in schedules.iterator(chunk_size=5000):
        groups.setdefault((json.dumps(rule, sort_keys=True), resource_class), []).append(next_run_at)
    for (rule, resource_class), starts in groups.items():
        _add_group(forecast, resource_class, json.loads(rule), starts, end)
    waiting = Run.objects.filter(
        state=RunState.PENDING, pending_reason=PendingReason.NOT_DUE, due_at__gte=start, due_at__lte=end
    ).values_list("resource_class", "due_at")
    for resource_class, due_at in waiting.iterator():
        forecast.add(resource_class, due_at)
    return forecast


def _add_group(forecast: Forecast, resource_class: str, data: dict, starts: list[datetime], end: datetime) -> None:
    """Every schedule of one rule contributes its next instant (first not yet materialized)
    and the rule's instants after it up to `end`."""
    try:
        rule = recurrence.parse_rule(data, anchor_required=False).anchored(min(starts))
    except (recurrence.RecurrenceError, TypeError, ValueError):
        rule = None
    if rule is None or rule.kind == "after_completion":
        for first in starts:
            forecast.add(resource_class, first)
        return
    # The rule's grid in the window; a schedule whose next instant is already past (a lagging
    # scanner) joins it at its first instant.
    instants = recurrence.instants_between(rule, forecast.start - timedelta(microseconds=1), end, PER_SCHEDULE_LIMIT)
    joining = [0] * (len(instants) + 1)  # schedules whose instants begin at index i
    for first in starts:
        index = bisect.bisect_left(instants, first)
        if index == len(instants) or instants[index] != first:
            forecast.add(resource_class, first)  # off the rule's grid: itself, then the grid
        joining[index] += 1
    active = 0
    for index, instant in enumerate(instants):
        active += joining[index]
        if active:
            forecast.add(resource_class, instant, active)
