"""Runtime statistics from accepted attempts over a rolling window, per job type and per
schedule: execution duration (claim to accepted completion) and queue delay (due to claim;
for requested work, creation to claim when it was created after its instant: models.owed_since),
separately. Forecasts expect a run of a schedule with enough history of its own to last its
own mean (`schedule_durations`), any other run its job type's (`job_type_durations`): both
read from a snapshot the cleanup loop measures every CAPACITY_STATS_REFRESH_SECONDS
(`refresh_snapshot`), so a forecast does not join a week of runs with their attempts each
time; without a recent snapshot they measure, as `measured_durations` does."""

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, QuerySet

from runs.models import ExpectedDuration, Run, StatisticsSnapshot, owed_since
from kernel.clock import authority_now

QUANTILES = (50, 95, 99)
_DURATION = ExpressionWrapper(F("accepted_attempt__finished_at") - F("accepted_attempt__started_at"),
                              output_field=DurationField())


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of ascending `sorted_values`; None when empty."""
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]


@dataclass(frozen=True)
class RuntimeStats:
    subject: str  # the job type's name, or the schedule's id
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


def _since(now):
    return (now or authority_now()) - timedelta(seconds=settings.CAPACITY_STATS_WINDOW_SECONDS)


def _statistics(subject: str, accepted) -> RuntimeStats:
    """The statistics of the latest CAPACITY_STATS_SAMPLES runs of `accepted` (runs with an
    accepted attempt, finished inside the window)."""
    rows = list(
        accepted.order_by("-finished_at")
        .values_list("accepted_attempt__started_at", "accepted_attempt__finished_at", "due_at", "created_at",
                     "trigger", "backfilled")[: settings.CAPACITY_STATS_SAMPLES]
    )
    durations = [(end - start).total_seconds() for start, end, *_ in rows if end is not None]
    delays = [
        max(0.0, (start - owed_since(due, created_at=created, trigger=trigger, backfilled=backfilled)).total_seconds())
        for start, _, due, created, trigger, backfilled in rows
    ]
    return RuntimeStats(subject, len(rows), _summary(durations), _summary(delays))


def _accepted(now, **where):
    return Run.objects.filter(accepted_attempt__isnull=False, finished_at__gte=_since(now), **where)


def _of_tenant(tenant) -> dict:
    return {} if tenant is None else {"tenant": tenant}


def job_type_statistics(job_type: str, *, now=None, tenant=None) -> RuntimeStats:
    """One job type's statistics from its latest accepted attempts inside the window: every
    tenant's (what forecasts expect), or only `tenant`'s (that tenant's own view)."""
    return _statistics(job_type, _accepted(now, job_type=job_type, **_of_tenant(tenant)))


def schedule_statistics(schedule_id: str, *, now=None) -> RuntimeStats:
    """One schedule's statistics (every run of it, scheduled or manual) from its latest
    accepted attempts inside the window."""
    return _statistics(schedule_id, _accepted(now, schedule_id=schedule_id))


def runtime_statistics(job_types, *, now=None, tenant=None) -> dict[str, RuntimeStats]:
    """Each of `job_types`' statistics (every tenant's runs, or only `tenant`'s). One statement
    finds the types with samples in the window; only those are read further (a type without
    any would read the whole window)."""
    now = now or authority_now()
    names = list(job_types)
    where = _of_tenant(tenant)
    sampled = set(_accepted(now, job_type__in=names, **where).values_list("job_type", flat=True).distinct()) if names else ()
    empty = _summary([])
    return {name: job_type_statistics(name, now=now, tenant=tenant) if name in sampled
            else RuntimeStats(name, 0, empty, empty)
            for name in names}


def measured_durations(schedules, *, now=None) -> dict[str, float]:
    """{schedule id: seconds a run of it is expected to take} for those of `schedules` (ids,
    or a query of schedules' ids) with at least CAPACITY_SCHEDULE_MIN_SAMPLES accepted
    attempts in the window: the mean of their latest CAPACITY_STATS_SAMPLES, to two
    significant digits (so a wave of schedules whose means differ by a hair still travels
    through the simulation as a few groups). Reads only those schedules' runs: a query in
    one statement, ids in statements of _ids_per_statement()."""
    now = now or authority_now()
    found: dict[str, float] = {}
    for chunk in _chunks(schedules):
        rows = (_accepted(now, schedule_id__in=chunk).values("schedule_id")
                .annotate(n=Count("id"), mean=Avg(_DURATION)).filter(n__gte=settings.CAPACITY_SCHEDULE_MIN_SAMPLES)
                .order_by().values_list("schedule_id", "n", "mean"))
        for schedule_id, n, mean in rows:
            if n > settings.CAPACITY_STATS_SAMPLES:  # a busy schedule: the mean of its latest samples only
                seconds = schedule_statistics(schedule_id, now=now).duration["mean"]
            else:
                seconds = _round(_seconds(mean))
            found[schedule_id] = two_significant_digits(seconds)
    return found


def _chunks(ids) -> list:
    """`ids` (a query of ids, or ids) as the lists of ids, or the query, statements may take."""
    if isinstance(ids, QuerySet):
        return [ids]
    ids, size = sorted({i for i in ids if i}), _ids_per_statement()
    return [ids[first:first + size] for first in range(0, len(ids), size)]


def _ids_per_statement() -> int:
    """SQLite takes at most 999 parameters; PostgreSQL has no limit, but each id costs Django
    and the driver time of their own (a long list is better a query: see above)."""
    return min(connection.features.max_query_params or 1000, 1000) - 1


def _seconds(mean) -> float:
    """An average duration as the backend returns it (a timedelta; microseconds on SQLite)."""
    return mean.total_seconds() if isinstance(mean, timedelta) else float(mean) / 1e6


def two_significant_digits(seconds: float) -> float:
    return float(f"{seconds:.2g}")


# --- The snapshot forecasts read ---------------------------------------------------------------


def schedule_durations(schedules, *, now=None) -> dict[str, float]:
    """measured_durations' answer as the latest snapshot has it (one indexed read), or measured
    now when there is no recent snapshot."""
    if not _snapshot_recent(now):
        return measured_durations(schedules, now=now)
    found: dict[str, float] = {}
    for chunk in _chunks(schedules):
        found.update(ExpectedDuration.objects.filter(kind=ExpectedDuration.SCHEDULE, subject__in=chunk)
                     .values_list("subject", "seconds"))
    return found


def job_type_durations(job_types, *, now=None) -> dict[str, float]:
    """{job type: seconds a run of it is expected to take} (RuntimeStats.expected_duration) for
    each of `job_types`, as the latest snapshot has it, or measured now without a recent one."""
    names = sorted(set(job_types))
    if not _snapshot_recent(now):
        return {name: stats.expected_duration() for name, stats in runtime_statistics(names, now=now).items()}
    default = float(settings.CAPACITY_DEFAULT_DURATION_SECONDS)
    found = dict(ExpectedDuration.objects.filter(kind=ExpectedDuration.JOB_TYPE, subject__in=names)
                 .values_list("subject", "seconds"))
    return {name: found.get(name, default) for name in names}


def _snapshot_recent(now) -> bool:
    measured = StatisticsSnapshot.objects.filter(pk=1).values_list("measured_at", flat=True).first()
    too_old = (now or authority_now()) - timedelta(seconds=3 * settings.CAPACITY_STATS_REFRESH_SECONDS)
    return measured is not None and measured >= too_old


def refresh_snapshot(*, now=None) -> bool:
    """Measure every schedule's and job type's expected duration again when the snapshot is
    CAPACITY_STATS_REFRESH_SECONDS old (True if it did). The measuring reads outside any
    transaction; the rows are replaced in one short transaction that holds the snapshot's row,
    so refreshers running at once replace them one after the other, each whole."""
    now = now or authority_now()
    due = now - timedelta(seconds=settings.CAPACITY_STATS_REFRESH_SECONDS)
    snapshot, _ = StatisticsSnapshot.objects.get_or_create(pk=1)
    if snapshot.measured_at is not None and snapshot.measured_at > due:
        return False
    from schedules.models import JobType, Schedule

    schedules = measured_durations(Schedule.objects.values("id"), now=now)
    job_types = runtime_statistics(JobType.objects.values_list("name", flat=True), now=now)
    rows = [ExpectedDuration(kind=ExpectedDuration.SCHEDULE, subject=i, seconds=s) for i, s in schedules.items()]
    rows += [ExpectedDuration(kind=ExpectedDuration.JOB_TYPE, subject=name, seconds=stats.expected_duration())
             for name, stats in job_types.items() if stats.samples]
    with transaction.atomic(durable=True):
        snapshot = StatisticsSnapshot.objects.select_for_update().get(pk=1)
        if snapshot.measured_at is not None and snapshot.measured_at > due:
            return False  # another refresher replaced them meanwhile
        ExpectedDuration.objects.all().delete()
        ExpectedDuration.objects.bulk_create(rows, batch_size=_ids_per_statement() // 5)
        snapshot.measured_at = now
        snapshot.save(update_fields=["measured_at"])
    return True
