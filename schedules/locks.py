"""The tenant's and a schedule's row locks, for the schedule services and the authority
alike. The order of every row lock (tenant, schedule, run, object) is in
runs/authority/locks.py."""

from schedules.models import Schedule, Tenant
from scheduler_project.errors import NotFound


def lock_tenant(tenant) -> Tenant:
    """Lock the tenant's row, read again: its writes (creates, run once, backfill) take turns,
    so quota counts and request-key look-ups under it are exact."""
    return Tenant.objects.select_for_update().get(id=tenant.id)


def lock_schedule(schedule_id: str, *, tenant, include_deleted=False) -> Schedule:
    schedules = Schedule.objects.select_for_update().filter(id=schedule_id, tenant=tenant)
    if not include_deleted:
        schedules = schedules.filter(deleted_at__isnull=True)
    schedule = schedules.first()
    if schedule is None:
        raise NotFound("no such schedule")
    return schedule
