"""Row locks, always taken in one order, so that no two transactions wait on each other:

1. tenant (`lock_tenant`: schedule creates and the tenant's other counted writes;
   `lock_tenant_quota`: requested work; many tenants in id order: statements.claim.tenants_lock),
2. schedule (`lock_schedule`; the schedules of many runs in id order:
   runs.authority.statements.schedules.schedules_lock_of_runs; a claim's:
   statements.claim.schedules_lock_for_claim), then,
   in a strict schedule's write, its resource class's admission epoch
   (runs.capacity.admission: confirming the admission's forecast),
3. run (`lock_schedule_then_run`; many runs in id order:
   runs.authority.statements.completions.completions_lock, statements.objects.objects_register_if_owned,
   statements.objects.runs_lock_of_objects (cleanup's batch);
   a claim's candidates skipping locked ones: statements.claim.runs_lock_candidates),
4. registry object (publication and cleanup lock the run first, then the object; cleanup's
   batch its rows in id order: statements.objects.objects_lock_among, objects_lock_deleting),
5. the tenant's storage figure (runs.models.TenantStorage, written after its objects, many
   tenants in id order: statements.objects.tenants_take_off_storage).

A transaction may skip a level, never go back up one. Claims lock tenants, then runs
(skipping locked ones); the sweeper locks runs only.

Every lock helper is here, for the authority and the schedule services above it
(schedule_services) alike. The hot path's set-based lock statements stay with the statements
they are part of (runs/authority/statements/), named above at their level; each statement's
docstring names the locks its caller must hold.
"""

from django.db.models import Subquery

from kernel.errors import NotFound
from runs.models import Run
from schedules.models import Schedule, Tenant


def lock_tenant(tenant) -> Tenant:
    """Lock the tenant's row, read again: its writes (creates, run once, backfill) take turns,
    so quota counts and request-key look-ups under it are exact."""
    return Tenant.objects.select_for_update().get(id=tenant.id)


def lock_tenant_quota(tenant) -> int:
    """Lock the tenant's row and read its quota of requested work waiting to be claimed
    (maxPendingManualRuns): two requests cannot both see room for the same runs."""
    return lock_tenant(tenant).max_pending_manual_runs


def lock_schedule(schedule_id: str, *, tenant, include_deleted=False) -> Schedule:
    schedules = Schedule.objects.select_for_update().filter(id=schedule_id, tenant=tenant)
    if not include_deleted:
        schedules = schedules.filter(deleted_at__isnull=True)
    schedule = schedules.first()
    if schedule is None:
        raise NotFound("no such schedule")
    return schedule


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
