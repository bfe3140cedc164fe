"""Capacity gauges for /metrics, read at scrape time: runtime statistics per job type, live
and busy slots per resource class, and `scheduler_required_slots`, the slots each class
needs so that every minute of the next CAPACITY_GAUGE_HORIZON_SECONDS meets the start
objective (an autoscaler's target: workers start before the wave, not after it)."""

from datetime import timedelta

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily

from runs.capacity.forecast import forecast
from runs.capacity.statistics import QUANTILES, runtime_statistics
from schedules.models import JobType
from scheduler_project.clock import authority_now


class CapacityCollector:
    def collect(self):
        yield from self._statistics()
        now = authority_now()
        ahead = forecast(now, now + timedelta(seconds=settings.CAPACITY_GAUGE_HORIZON_SECONDS))
        live = GaugeMetricFamily("scheduler_live_slots", "Slots of live worker processes.", labels=["resource_class"])
        busy = GaugeMetricFamily("scheduler_busy_slots", "Slots running an occurrence.", labels=["resource_class"])
        required = GaugeMetricFamily(
            "scheduler_required_slots",
            "Slots needed so every minute of the coming horizon starts within the objective at p99.",
            labels=["resource_class"],
        )
        for rc, capacity in sorted(ahead.capacity.items()):
            live.add_metric([rc], capacity["liveSlots"])
            busy.add_metric([rc], capacity["busySlots"])
            required.add_metric([rc], ahead.required.get(rc, capacity["busySlots"]))
        yield from (live, busy, required)

    def _statistics(self):
        names = list(JobType.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
        duration = GaugeMetricFamily(
            "scheduler_job_duration_seconds", "Duration of accepted attempts over the rolling window.",
            labels=["job_type", "quantile"],
        )
        delay = GaugeMetricFamily(
            "scheduler_job_queue_delay_seconds", "Queue delay of accepted attempts over the rolling window.",
            labels=["job_type", "quantile"],
        )
        for name, stats in runtime_statistics(names).items():
            for q in QUANTILES:
                if stats.duration[f"p{q}"] is not None:
                    duration.add_metric([name, str(q / 100)], stats.duration[f"p{q}"])
                    delay.add_metric([name, str(q / 100)], stats.queue_delay[f"p{q}"])
        yield duration
        yield delay
