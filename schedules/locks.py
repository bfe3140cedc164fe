"""Row locks, always taken in one order: tenant, then schedule, then occurrence."""

from django.db.models import Subquery

from schedules.models import Schedule
from scheduler_project.errors import NotFound

from runs.models import Run


def lock_schedule_then_run(run_id: str, *, tenant=None) -> tuple[Schedule, Run]:
    """Lock a run's schedule, then the run; NotFound if absent or not the tenant's."""
    runs = Run.objects.filter(id=run_id)
    if tenant is not None:
        runs = runs.filter(tenant=tenant)
    # A run never changes schedule, so finding the schedule through it needs no run lock.
    schedule = Schedule.objects.select_for_update().filter(id=Subquery(runs.values("schedule_id")[:1])).first()
    if schedule is None:
        raise NotFound("no such run")
    run = Run.objects.select_for_update().get(id=run_id)
    return schedule, run


def lock_schedule(schedule_id: str, *, tenant, include_deleted=False) -> Schedule:
    schedules = Schedule.objects.select_for_update().filter(id=schedule_id, tenant=tenant)
    if not include_deleted:
        schedules = schedules.filter(deleted_at__isnull=True)
    schedule = schedules.first()
    if schedule is None:
        raise NotFound("no such schedule")
    return schedule
