"""Runtime statistics per job type from accepted attempts over a rolling window: execution
duration (claim to accepted completion) and queue delay (due to claim), separately."""

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from runs.models import Run
from scheduler_project.clock import authority_now

QUANTILES = (50, 95, 99)


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of ascending `sorted_values`; None when empty."""
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]


@dataclass(frozen=True)
class RuntimeStats:
    job_type: str
    samples: int
    duration: dict  # {"p50": s, "p95": s, "p99": s, "mean": s}, None without samples
    queue_delay: dict

    def expected_duration(self) -> float:
        """Seconds a slot is expected to be busy with one run of this type."""
        mean = self.duration["mean"]
        return mean if mean is not None else float(settings.CAPACITY_DEFAULT_DURATION_SECONDS)


def _summary(values: list[float]) -> dict:
    values = sorted(values)
    summary = {f"p{q}": _round(percentile(values, q)) for q in QUANTILES}
    summary["mean"] = _round(sum(values) / len(values)) if values else None
    return summary


def _round(value):
    return None if value is None else round(value, 3)


def job_type_statistics(job_type: str, *, now=None) -> RuntimeStats:
    """One job type's statistics from its latest accepted attempts inside the window."""
    since = (now or authority_now()) - timedelta(seconds=settings.CAPACITY_STATS_WINDOW_SECONDS)
    rows = list(
        Run.objects.filter(job_type=job_type, accepted_attempt__isnull=False, finished_at__gte=since)
        .order_by("-finished_at")
        .values_list("accepted_attempt__started_at", "accepted_attempt__finished_at", "due_at")[
            : settings.CAPACITY_STATS_SAMPLES
        ]
    )
    durations = [(end - start).total_seconds() for start, end, _ in rows if end is not None]
    delays = [max(0.0, (start - due).total_seconds()) for start, _, due in rows]
    return RuntimeStats(job_type, len(rows), _summary(durations), _summary(delays))


def runtime_statistics(job_types, *, now=None) -> dict[str, RuntimeStats]:
    now = now or authority_now()
    return {name: job_type_statistics(name, now=now) for name in job_types}
