"""Row locks, always taken in one order, so that no two transactions wait on each other:

1. tenant (`schedules.locks.lock_tenant`: schedule creates, and here `lock_tenant_quota`),
2. schedule (`schedules.locks.lock_schedule`; the schedules of many runs in id order:
   sql.lock_schedules_of_runs), then, in a strict schedule's write, its resource class's
   admission epoch (runs.capacity.admission: confirming the admission's forecast),
3. run (`lock_schedule_then_run`; many runs in id order, as every hot statement does),
4. registry object (publication and cleanup lock the run first, then the object),
5. the tenant's storage figure (runs.models.TenantStorage, written after its objects).

A transaction may skip a level, never go back up one. Claims lock tenants, then runs
(skipping locked ones); the sweeper locks runs only.
"""

from django.db.models import Subquery

from runs.models import Run
from schedules.locks import lock_tenant
from schedules.models import Schedule
from scheduler_project.errors import NotFound


def lock_tenant_quota(tenant) -> int:
    """Lock the tenant's row and read its quota of requested work waiting to be claimed
    (maxPendingManualRuns): two requests cannot both see room for the same runs."""
    return lock_tenant(tenant).max_pending_manual_runs


def lock_schedule_then_run(run_id: str, *, tenant=None) -> tuple[Schedule, Run]:
    """Lock a run's schedule, then the run; NotFound if absent or not the tenant's."""
    runs = Run.objects.filter(id=run_id)
    if tenant is not None:
        runs = runs.filter(tenant=tenant)
    # A run never changes schedule, so finding the schedule through it needs no run lock.
    schedule = Schedule.objects.select_for_update().filter(id=Subquery(runs.values("schedule_id")[:1])).first()
    if schedule is None:
        raise NotFound("no such run")
    run = Run.objects.select_for_update().filter(id=run_id).first()
    if run is None:  # removed (retention) while this transaction waited for its lock
        raise NotFound("no such run")
    return schedule, run
