"""The next 24 hours: occurrences due per minute per resource class, computed from the
schedules' rules (nothing is materialized), plus occurrences already materialized and
waiting for their due time."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from runs.models import PendingReason, Run, RunState
from schedules import recurrence
from schedules.models import Schedule

HORIZON = timedelta(hours=24)
MINUTES = 24 * 60
# The most instants one schedule contributes: an every-second rule stops here.
PER_SCHEDULE_LIMIT = 24 * 3600


@dataclass
class Forecast:
    start: datetime  # the first minute (whole minute, UTC)
    per_class: dict[str, list[int]] = field(default_factory=dict)

    def add(self, resource_class: str, instant: datetime) -> None:
        minute = int((instant - self.start).total_seconds() // 60)
        if 0 <= minute < MINUTES:
            self.per_class.setdefault(resource_class, [0] * MINUTES)[minute] += 1

    def totals(self) -> list[int]:
        return [sum(column) for column in zip(*self.per_class.values())] or [0] * MINUTES

    def total(self) -> int:
        return sum(self.totals())


def next_24_hours(now: datetime) -> Forecast:
    start = now.replace(second=0, microsecond=0)
    forecast = Forecast(start=start)
    end = start + HORIZON - timedelta(microseconds=1)
    schedules = (
        Schedule.objects.filter(next_run_at__isnull=False, next_run_at__lte=end, deleted_at__isnull=True)
        .select_related("job_type").only("recurrence", "next_run_at", "job_type__resource_class")
    )
    for schedule in schedules.iterator(chunk_size=2000):
        for instant in _instants(schedule, end):
            forecast.add(schedule.job_type.resource_class, instant)
    waiting = Run.objects.filter(
        state=RunState.PENDING, pending_reason=PendingReason.NOT_DUE, due_at__gte=start, due_at__lte=end
    ).values_list("resource_class", "due_at")
    for resource_class, due_at in waiting.iterator():
        forecast.add(resource_class, due_at)
    return forecast


def _instants(schedule: Schedule, end: datetime) -> list[datetime]:
    """The schedule's next instant (first not yet materialized) and the rule's instants
    after it up to `end`."""
    first = schedule.next_run_at
    try:
        rule = recurrence.parse_rule(schedule.recurrence, anchor_required=False).anchored(first)
    except (recurrence.RecurrenceError, TypeError, ValueError):
        return [first]
    return [first, *recurrence.instants_between(rule, first, end, PER_SCHEDULE_LIMIT - 1)]
