"""What the Overview answers first: is anything late or failing right now, and since when.

- Late: runs waiting (pending or queued) longer than the start objective past the instant
  their start is owed (runs.models.owed_since: the due instant, or creation for requested
  work), read from the unfinished runs' indexes; how many, the oldest, and the first few
  with their schedules.
- Failing: schedules whose last outcome (succeeded or failed) is a failure, among those with
  a failed run scheduled in the last 24 hours (the finished runs' state index, per tenant),
  with the first failure since their last success and how many in a row.

Each is a fixed number of queries, whatever the number of runs or schedules."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from runs.models import UNFINISHED, Run, RunState, owed_since_expression
from runs.selectors import waiting_on_key, with_concurrency_key
from schedules.models import Schedule, Tenant
from schedules.recurrence import EARLIEST
from schedules.selectors import unavailable_job_types

SHOWN = 10
FAILING_WINDOW = timedelta(hours=24)
FAILING_CANDIDATES = 200  # schedules with a recent failure looked at, most recent first


@dataclass
class Late:
    count: int = 0
    since: datetime | None = None
    oldest: list = field(default_factory=list)  # runs, each with .owed (datetime)


@dataclass
class Failing:
    count: int = 0
    more: bool = False  # more schedules failed recently than were looked at
    schedules: list = field(default_factory=list)  # schedules with failing_since, failures, last_error


def late_now(now: datetime) -> Late:
    cutoff = now - timedelta(seconds=settings.CONSOLE_START_OBJECTIVE_SECONDS)
    owed = owed_since_expression("due_at")
    waiting = (
        Run.objects.filter(UNFINISHED, state__in=[RunState.PENDING, RunState.QUEUED], due_at__lt=cutoff)
        .annotate(owed=owed).filter(owed__lt=cutoff)
    )
    summary = waiting.aggregate(count=Count("id"), since=Min("owed"))
    if not summary["count"]:
        return Late()
    oldest = list(with_concurrency_key(waiting.select_related("schedule", "tenant")).order_by("owed", "id")[:SHOWN])
    unavailable = unavailable_job_types()
    key_bound = waiting_on_key(oldest)
    for run in oldest:
        run.waiting_for = _waiting_for(run, unavailable, key_bound)
    return Late(summary["count"], summary["since"], oldest)


def _waiting_for(run, unavailable, key_bound) -> str:
    from scheduler_project.http.representations import run_pending_reason

    reason = run_pending_reason(run, unavailable, key_bound)
    if reason:
        return reason
    return "a free slot" if run.state == RunState.QUEUED else "promotion"


def failing_now(now: datetime) -> Failing:
    tenants = list(Tenant.objects.values_list("id", flat=True))
    recent = list(
        Run.objects.filter(tenant_id__in=tenants, state=RunState.FAILED, finished_at__isnull=False,
                           scheduled_at__gte=now - FAILING_WINDOW)
        .values("schedule_id").annotate(last=Max("scheduled_at")).order_by("-last")
        .values_list("schedule_id", flat=True)[: FAILING_CANDIDATES + 1]
    )
    more = len(recent) > FAILING_CANDIDATES
    finished = Run.objects.filter(schedule=OuterRef("pk"), finished_at__isnull=False)
    outcomes = finished.filter(state__in=[RunState.SUCCEEDED, RunState.FAILED]).order_by("-scheduled_at", "-id")
    # The failures since the last success (every failure when it never succeeded).
    streak = finished.filter(state=RunState.FAILED,
                             scheduled_at__gt=Coalesce(OuterRef("last_success"), Value(EARLIEST)))
    schedules = (
        Schedule.objects.filter(id__in=recent[:FAILING_CANDIDATES]).select_related("tenant")
        .annotate(
            last_outcome=Subquery(outcomes.values("state")[:1]),
            last_error=Subquery(outcomes.values("error")[:1]),
            last_success=Subquery(outcomes.filter(state=RunState.SUCCEEDED).values("scheduled_at")[:1]),
        )
        .filter(last_outcome=RunState.FAILED)
        .annotate(
            failing_since=Subquery(streak.order_by("scheduled_at").values("scheduled_at")[:1]),
            failures=Subquery(streak.order_by().values("schedule").annotate(n=Count("id")).values("n")),
        )
        .order_by("failing_since", "id")
    )
    found = list(schedules)
    return Failing(len(found), more, found[:SHOWN])


def job_types_unavailable() -> list[tuple[str, int]]:
    """(job type, live schedules using it) for each job type whose declaration is gone."""
    unavailable = unavailable_job_types()
    if not unavailable:
        return []
    using = dict(Schedule.objects.filter(deleted_at__isnull=True, job_type_id__in=unavailable)
                 .values_list("job_type_id").annotate(n=Count("id")))
    return [(name, using.get(name, 0)) for name in sorted(unavailable)]
