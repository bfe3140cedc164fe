"""The next 24 hours, as the capacity forecast (GET /api/v1/capacity/forecast, one
computation for both) sees them: per minute and resource class, the occurrences due (from
the schedules' rules, nothing materialized, and those already materialized: see
runs.capacity.demand), the live slots per class and the start lateness p99 per minute its
wave simulation predicts. When the next 24 hours are more than one forecast may simulate
(CAPACITY_FORECAST_BUDGET), the page shows a shorter horizon and says so."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from runs.capacity.forecast import ForecastTooLarge, forecast as capacity_forecast

HORIZON = timedelta(hours=24)
SHORTER = (timedelta(hours=6), timedelta(hours=1))  # tried in turn when the 24 hours are too much work
MINUTES = 24 * 60


@dataclass
class Capacity:
    live_slots: dict[str, int] = field(default_factory=dict)  # class -> slots of live worker reports, now
    p99: dict[str, dict[int, float]] = field(default_factory=dict)  # class -> minute -> seconds (inf: never starts)
    objective: float = 0.0


@dataclass
class Forecast:
    start: datetime  # the first minute (whole minute, UTC)
    per_class: dict[str, list[int]] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=Capacity)
    horizon: timedelta = HORIZON  # shorter when the 24 hours were too much work for one forecast

    def add(self, resource_class: str, instant: datetime, count: int = 1) -> None:
        minute = self.minute(instant)
        if 0 <= minute < MINUTES:
            self.per_class.setdefault(resource_class, [0] * MINUTES)[minute] += count

    def minute(self, instant: datetime) -> int:
        return int((instant - self.start).total_seconds() // 60)

    def totals(self) -> list[int]:
        return [sum(column) for column in zip(*self.per_class.values())] or [0] * MINUTES

    def total(self) -> int:
        return sum(self.totals())


def next_24_hours(now: datetime) -> Forecast:
    """The 24 hours from `now`'s minute: the occurrences due per minute and class, the live
    slots and the predicted p99 start lateness of each minute with occurrences."""
    start = now.replace(second=0, microsecond=0)
    for horizon in (HORIZON, *SHORTER):
        try:
            result = capacity_forecast(start, start + horizon, required=False)
            break
        except ForecastTooLarge:
            continue
    else:
        return Forecast(start=start, horizon=timedelta(0))
    forecast = Forecast(start=start, horizon=horizon)
    forecast.capacity = Capacity({rc: c["liveSlots"] for rc, c in result.capacity.items()}, {}, result.objective)
    for row in result.rows:
        forecast.add(row.resource_class, row.minute, row.due)
        late = row.p(99)
        if late is not None:
            forecast.capacity.p99.setdefault(row.resource_class, {})[forecast.minute(row.minute)] = late
    return forecast
