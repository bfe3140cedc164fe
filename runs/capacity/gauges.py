"""Capacity gauges for /metrics, read at scrape time: runtime statistics per job type, live
and busy slots per resource class, and `scheduler_required_slots`, the slots each class
needs so that every minute of the next CAPACITY_GAUGE_HORIZON_SECONDS meets the start
objective (an autoscaler's target: workers start before the wave, not after it).

The costly part (the required slots: the rules and history of every schedule due in the
horizon, then a simulation; and the job types' statistics over the window's runs) is
computed at most once per CAPACITY_GAUGE_CACHE_SECONDS by a process, the required slots
over the horizon plus that interval so a value read from the cache still covers every wave
of the horizon. Live and busy slots are read at every scrape. Concurrent scrapes wait for
one computation."""

import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily

from runs.capacity.forecast import ForecastTooLarge, required_slots
from runs.capacity.live import capacity_by_class
from runs.capacity.statistics import QUANTILES, RuntimeStats, runtime_statistics
from schedules.models import JobType
from kernel.clock import authority_now


@dataclass(frozen=True)
class Figures:
    computed: float  # time.monotonic() when computed
    statistics: dict[str, RuntimeStats]  # per enabled job type
    required: dict[str, int]  # per resource class


logger = logging.getLogger(__name__)
_lock = threading.Lock()
_cached: Figures | None = None


def cached_figures() -> Figures:
    """The job types' statistics and each class's required slots, computed at most once per
    cache interval (every time with CAPACITY_GAUGE_CACHE_SECONDS 0)."""
    global _cached
    ttl = settings.CAPACITY_GAUGE_CACHE_SECONDS
    with _lock:
        if ttl > 0 and _cached is not None and time.monotonic() - _cached.computed < ttl:
            return _cached
        names = list(JobType.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
        now = authority_now()
        horizon = timedelta(seconds=settings.CAPACITY_GAUGE_HORIZON_SECONDS + max(0, ttl))
        _cached = Figures(time.monotonic(), runtime_statistics(names, now=now), _required(now, now + horizon))
        return _cached


def _required(start, end) -> dict[str, int]:
    """The required slots, or none (the gauge then shows the busy slots) when the horizon is
    more than one forecast may simulate: a scrape's cost stays bounded."""
    try:
        return required_slots(start, end)
    except ForecastTooLarge:
        logger.warning("scheduler_required_slots: the next %s s are more than CAPACITY_FORECAST_BUDGET simulates",
                       (end - start).total_seconds())
        return {}


def forget_cached_figures() -> None:
    """The next scrape computes the figures afresh."""
    global _cached
    with _lock:
        _cached = None


class CapacityCollector:
    def collect(self):
        figures = cached_figures()
        yield from self._statistics(figures.statistics)
        capacity = capacity_by_class()
        live = GaugeMetricFamily("scheduler_live_slots", "Slots of live worker processes.", labels=["resource_class"])
        busy = GaugeMetricFamily("scheduler_busy_slots", "Slots running an occurrence.", labels=["resource_class"])
        required = GaugeMetricFamily(
            "scheduler_required_slots",
            "Slots needed so every minute of the coming horizon starts within the objective at p99.",
            labels=["resource_class"],
        )
        for rc, slots in sorted(capacity.items()):
            live.add_metric([rc], slots["liveSlots"])
            busy.add_metric([rc], slots["busySlots"])
            required.add_metric([rc], figures.required.get(rc, slots["busySlots"]))
        yield from (live, busy, required)

    @staticmethod
    def _statistics(statistics: dict[str, RuntimeStats]):
        duration = GaugeMetricFamily(
            "scheduler_job_duration_seconds", "Duration of accepted attempts over the rolling window.",
            labels=["job_type", "quantile"],
        )
        delay = GaugeMetricFamily(
            "scheduler_job_queue_delay_seconds", "Queue delay of accepted attempts over the rolling window.",
            labels=["job_type", "quantile"],
        )
        for name, stats in statistics.items():
            for q in QUANTILES:
                if stats.duration[f"p{q}"] is not None:
                    duration.add_metric([name, str(q / 100)], stats.duration[f"p{q}"])
                    delay.add_metric([name, str(q / 100)], stats.queue_delay[f"p{q}"])
        yield duration
        yield delay
