"""The health evaluation: one pass finds every breach of every schedule's expectations and
every incident a later occurrence resolved, a few set-based statements whatever the number
of schedules. Any number of passes may run at once (`manage.py health` processes): the
incident's unique keys (runs.models.Incident) make one incident of one breach and at most
one open incident per schedule and kind: a pass inserts what it found, and the database
drops what another pass already reported (no lock, no check before the write).

The clock is database time (`now`, passed in so tests drive it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.db.models import (
    Count,
    DateTimeField,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    Func,
    Max,
    Min,
    OuterRef,
    Q,
    Value,
)
from django.db.models.functions import Coalesce, Greatest

from runs.health.forecast import forecast_step
from runs.models import UNFINISHED, Incident, IncidentKind, Run, RunState, Trigger
from schedules.models import Schedule
from kernel.clock import authority_now, instant

EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)  # before every instant: no success yet


@dataclass
class HealthStats:
    opened: dict = field(default_factory=dict)
    resolved: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.opened.values()) or any(self.resolved.values())

    def __str__(self):
        parts = [f"opened.{kind}={n}" for kind, n in sorted(self.opened.items()) if n]
        parts += [f"resolved.{kind}={n}" for kind, n in sorted(self.resolved.items()) if n]
        return " ".join(parts) or "nothing"


class seconds_of(Func):
    """An integer column of seconds as a duration, for arithmetic on instants (SQLite keeps
    durations as microseconds)."""

    output_field = DurationField()

    def __init__(self, column: str):
        super().__init__(F(column))

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="(%(expressions)s * interval '1 second')", **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="(%(expressions)s * 1000000)", **extra)


def _after(instant_column: str, seconds_column: str) -> ExpressionWrapper:
    """`instant_column` plus `seconds_column` seconds, as an instant."""
    return ExpressionWrapper(F(instant_column) + seconds_of(seconds_column), output_field=DateTimeField())


WATCHED = Q(deleted_at__isnull=True, paused=False)  # a paused schedule owes no start


def health_pass(*, now: datetime | None = None) -> HealthStats:
    """Resolve what later occurrences met, then open what is breached now."""
    now = now or authority_now()
    stats = HealthStats()
    stats.resolved = resolve_incidents(now)
    at_risk, passed = forecast_step(now)
    if passed:
        stats.resolved[IncidentKind.FORECAST] = stats.resolved.get(IncidentKind.FORECAST, 0) + passed
    breaches = [*late_starts(now), *long_runs(now), *failure_streaks(now), *at_risk]
    stats.opened = open_incidents(breaches, now)
    _last_pass["at"] = now
    return stats


# --- Breaches -------------------------------------------------------------------------------


def _not_reported(kind: str):
    """No incident of `kind` of the schedule is open, nor opened for this or a later instant:
    a late or stale read never reports a breach again once a newer one was."""
    return ~Exists(Incident.objects.filter(schedule_id=OuterRef("schedule_id"), kind=kind).filter(
        Q(resolved_at__isnull=True) | Q(instant__gte=OuterRef("scheduled_at"))))


def late_starts(now: datetime) -> list[Incident]:
    """Occurrences not started startWithinSeconds after their instant: materialized and
    unclaimed (no worker, a job type gone, a full key), or never materialized at all (the
    scanner stopped): the schedule's next instant is that late."""
    unstarted = (
        Run.objects.filter(UNFINISHED, trigger=Trigger.SCHEDULE, state__in=(RunState.PENDING, RunState.QUEUED),
                           started_at__isnull=True)
        .filter(schedule__expect_start_within_seconds__isnull=False, schedule__deleted_at__isnull=True,
                schedule__paused=False)
        .alias(deadline=_after("scheduled_at", "schedule__expect_start_within_seconds"))
        .filter(deadline__lt=now)
        .filter(_not_reported(IncidentKind.LATE_START))
        .values("schedule_id", "tenant_id", "schedule__expect_start_within_seconds")
        .annotate(first=Min("scheduled_at"))
    )
    breaches = {row["schedule_id"]: Incident(
        tenant_id=row["tenant_id"], schedule_id=row["schedule_id"], kind=IncidentKind.LATE_START,
        breach_key=f"instant:{instant(row['first'])}", instant=row["first"],
        detail={"startWithinSeconds": row["schedule__expect_start_within_seconds"]},
    ) for row in unstarted}
    if breaches:  # name the run of each (one statement for them all)
        wanted = Q()
        for incident in breaches.values():
            wanted |= Q(schedule_id=incident.schedule_id, scheduled_at=incident.instant)
        for run_id, schedule_id in Run.objects.filter(wanted, trigger=Trigger.SCHEDULE).values_list(
                "id", "schedule_id"):
            breaches[schedule_id].run_id = run_id
    never_materialized = (
        Schedule.objects.filter(WATCHED, expect_start_within_seconds__isnull=False, next_run_at__lt=now)
        .alias(deadline=_after("next_run_at", "expect_start_within_seconds"))
        .filter(deadline__lt=now)
        .filter(~Exists(Incident.objects.filter(schedule_id=OuterRef("id"), kind=IncidentKind.LATE_START).filter(
            Q(resolved_at__isnull=True) | Q(instant__gte=OuterRef("next_run_at")))))
        .exclude(id__in=list(breaches))
        .values_list("id", "tenant_id", "next_run_at", "expect_start_within_seconds")
    )
    for schedule_id, tenant_id, due, within in never_materialized:
        breaches[schedule_id] = Incident(
            tenant_id=tenant_id, schedule_id=schedule_id, kind=IncidentKind.LATE_START,
            breach_key=f"instant:{instant(due)}", instant=due,
            detail={"startWithinSeconds": within, "materialized": False},
        )
    return list(breaches.values())


# When this process's last pass read the clock: the next looks for runs finished since then
# (less FINISHED_SLACK, for a completion whose write committed after that read), and at most
# HEALTH_LOOKBACK_SECONDS back (the first pass of a process, a clock gone back). Its cost,
# not its correctness: every pass of every process looks back at least to its own last pass.
_last_pass = {"at": None}
FINISHED_SLACK = timedelta(seconds=60)


def finished_since(now: datetime) -> datetime:
    """How far back this pass looks for runs that finished too late."""
    lookback = timedelta(seconds=settings.HEALTH_LOOKBACK_SECONDS)
    last = _last_pass["at"]
    if last is None or not timedelta(0) <= now - last <= lookback:
        return now - lookback
    return max(last - FINISHED_SLACK, now - lookback)


def long_runs(now: datetime) -> list[Incident]:
    """Runs still running finishWithinSeconds after they started, and runs that finished
    later than that since the last pass (a breach that began and ended between two passes):
    one incident per run, the schedule's earliest started breach first."""
    expecting = Q(schedule__expect_finish_within_seconds__isnull=False, schedule__deleted_at__isnull=True)
    columns = ("id", "schedule_id", "tenant_id", "scheduled_at", "started_at", "finished_at",
               "schedule__expect_finish_within_seconds")
    running = (
        Run.objects.filter(expecting, state=RunState.RUNNING)
        .alias(deadline=_after("started_at", "schedule__expect_finish_within_seconds"))
        .filter(deadline__lt=now)
        .filter(~Exists(Incident.objects.filter(schedule_id=OuterRef("schedule_id"), kind=IncidentKind.LONG_RUNNING,
                                                resolved_at__isnull=True)))
        .values_list(*columns)
    )
    # A breach that another incident of the kind, open while it lasted, already stood for
    # (one resolved since by a later occurrence, say) is not told again.
    covered = Incident.objects.filter(schedule_id=OuterRef("schedule_id"), kind=IncidentKind.LONG_RUNNING,
                                      opened_at__lte=OuterRef("finished_at")).filter(
        Q(resolved_at__isnull=True) | Q(resolved_at__gte=OuterRef("deadline")))
    finished_late = (
        Run.objects.filter(expecting, finished_at__gte=finished_since(now), started_at__isnull=False)
        .alias(deadline=_after("started_at", "schedule__expect_finish_within_seconds"))
        .filter(finished_at__gt=F("deadline"))
        .filter(_not_reported(IncidentKind.LONG_RUNNING), ~Exists(covered))
        .values_list(*columns)
    )
    breaches = {}
    for run_id, schedule_id, tenant_id, scheduled_at, started_at, finished_at, within in sorted(
            [*running, *finished_late], key=lambda row: (row[4], row[0])):
        detail = {"finishWithinSeconds": within, "startedAt": instant(started_at)}
        if finished_at is not None:
            detail["finishedAt"] = instant(finished_at)
        breaches.setdefault(schedule_id, Incident(
            tenant_id=tenant_id, schedule_id=schedule_id, kind=IncidentKind.LONG_RUNNING, breach_key=f"run:{run_id}",
            run_id=run_id, instant=scheduled_at, detail=detail,
        ))
    return list(breaches.values())


def failure_streaks(now: datetime) -> list[Incident]:
    """maxConsecutiveFailures runs in a row failed: counted since the schedule's latest
    success, for the schedules with a failure finished within HEALTH_LOOKBACK_SECONDS (only
    a finishing run changes a streak)."""
    since = now - timedelta(seconds=settings.HEALTH_LOOKBACK_SECONDS)
    lately_failed = Run.objects.filter(state=RunState.FAILED, finished_at__gte=since).values("schedule_id")
    last_success = (Run.objects.filter(schedule_id=OuterRef("schedule_id"), state=RunState.SUCCEEDED)
                    .order_by("-scheduled_at").values("scheduled_at")[:1])
    streaks = (
        Run.objects.filter(state=RunState.FAILED, schedule_id__in=lately_failed,
                           schedule__expect_max_consecutive_failures__isnull=False, schedule__deleted_at__isnull=True)
        .filter(~Exists(Incident.objects.filter(schedule_id=OuterRef("schedule_id"), kind=IncidentKind.FAILURES,
                                                resolved_at__isnull=True)))
        .alias(last_success=Coalesce(last_success, Value(EARLIEST), output_field=DateTimeField()))
        .filter(scheduled_at__gt=F("last_success"))
        .values("schedule_id", "tenant_id", "schedule__expect_max_consecutive_failures")
        .annotate(first=Min("scheduled_at"), last=Max("scheduled_at"), failed=Count("id"))
        .filter(failed__gte=F("schedule__expect_max_consecutive_failures"))
    )
    breaches = {row["schedule_id"]: Incident(
        tenant_id=row["tenant_id"], schedule_id=row["schedule_id"], kind=IncidentKind.FAILURES,
        breach_key=f"from:{instant(row['first'])}", instant=row["last"],
        detail={"maxConsecutiveFailures": row["schedule__expect_max_consecutive_failures"],
                "failed": row["failed"]},
    ) for row in streaks}
    if breaches:
        wanted = Q()
        for incident in breaches.values():
            wanted |= Q(schedule_id=incident.schedule_id, scheduled_at=incident.instant)
        for run_id, schedule_id in Run.objects.filter(wanted, state=RunState.FAILED).values_list("id", "schedule_id"):
            breaches[schedule_id].run_id = run_id
    return list(breaches.values())


def open_incidents(breaches: list[Incident], now: datetime) -> dict:
    """Insert the breaches' incidents in one statement; a breach another pass already
    reported, or a schedule with an incident of the kind open, is left out by the unique
    keys. Answers how many of each kind this pass opened."""
    if not breaches:
        return {}
    ids = []
    for incident in breaches:
        incident.opened_at = now
        ids.append(incident.id)
    Incident.objects.bulk_create(breaches, ignore_conflicts=True)
    opened = {}
    for kind in Incident.objects.filter(id__in=ids).values_list("kind", flat=True):
        opened[kind] = opened.get(kind, 0) + 1
    return opened


# --- Resolutions ----------------------------------------------------------------------------


def _later_runs(**conditions):
    return Run.objects.filter(schedule_id=OuterRef("schedule_id"), scheduled_at__gt=OuterRef("instant"), **conditions)


def resolve_incidents(now: datetime) -> dict:
    """One guarded update per kind: an open incident is resolved by a later occurrence that
    met the expectation; every open incident of a schedule deleted, paused (late starts), or
    no longer expecting it, ends with that reason."""
    open_ = Incident.objects.filter(resolved_at__isnull=True)
    # Another pass may have opened an incident after this one read the clock: never before it opened.
    at = Greatest(Value(now, output_field=DateTimeField()), F("opened_at"))
    on_time = (_later_runs(trigger=Trigger.SCHEDULE, started_at__isnull=False)
               .alias(deadline=_after("scheduled_at", "schedule__expect_start_within_seconds"))
               .filter(started_at__lte=F("deadline")))
    in_time = (_later_runs(finished_at__isnull=False, started_at__isnull=False,
                           state__in=(RunState.SUCCEEDED, RunState.FAILED))
               .alias(deadline=_after("started_at", "schedule__expect_finish_within_seconds"))
               .filter(finished_at__lte=F("deadline")))
    succeeded = _later_runs(state=RunState.SUCCEEDED)
    recovered = {
        IncidentKind.LATE_START: Exists(on_time),
        IncidentKind.LONG_RUNNING: Exists(in_time),
        IncidentKind.FAILURES: Exists(succeeded),
    }
    expectation = {
        IncidentKind.LATE_START: "schedule__expect_start_within_seconds",
        IncidentKind.LONG_RUNNING: "schedule__expect_finish_within_seconds",
        IncidentKind.FAILURES: "schedule__expect_max_consecutive_failures",
        IncidentKind.FORECAST: "schedule__expect_start_within_seconds",
    }
    resolved = {}
    gone = Schedule.objects.filter(id=OuterRef("schedule_id"), deleted_at__isnull=False)
    resolved_gone = open_.filter(Exists(gone)).update(resolved_at=at, resolution="schedule_deleted")
    for kind, column in expectation.items():
        n = open_.filter(kind=kind, **{f"{column}__isnull": True}).update(
            resolved_at=at, resolution="expectation_removed")
        if kind in (IncidentKind.LATE_START, IncidentKind.FORECAST):  # a paused schedule owes no start
            n += open_.filter(kind=kind, schedule__paused=True).update(resolved_at=at, resolution="paused")
        if kind in recovered:
            n += open_.filter(recovered[kind], kind=kind).update(resolved_at=at, resolution="recovered")
        if n:
            resolved[kind] = n
    if resolved_gone:
        resolved["deleted"] = resolved_gone
    return resolved
