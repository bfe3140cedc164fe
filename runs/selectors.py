"""Run reads: the authoritative run, and keyset pages of a schedule's history."""

from django.db.models import Prefetch, Q

from runs.clock import authority_now
from runs.models import Attempt, Run
from scheduler_project.errors import NotFound

__all__ = ["authority_now", "run_get", "runs_page"]


def _with_details(runs):
    return runs.select_related("schedule").prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("number")), "effect_intents"
    )


def run_get(*, tenant, run_id: str) -> Run:
    run = _with_details(Run.objects.filter(id=run_id, tenant=tenant)).first()
    if run is None:
        raise NotFound("no such run")
    return run


def runs_page(*, schedule, upper_bound, after: tuple | None, limit: int) -> list[Run]:
    """Runs ordered by (scheduled_at, id) descending, created no later than ``upper_bound``,
    strictly after the ``after`` keyset position. The pinned bound keeps pages stable."""
    runs = Run.objects.filter(schedule=schedule, created_at__lte=upper_bound)
    if after is not None:
        scheduled_at, run_id = after
        runs = runs.filter(Q(scheduled_at__lt=scheduled_at) | Q(scheduled_at=scheduled_at, id__lt=run_id))
    return list(_with_details(runs.order_by("-scheduled_at", "-id"))[:limit])
