"""Bulk pause: one action over every schedule of the tenant its filter matches, in bounded
batches (no transaction locks more than BULK_BATCH schedules). Its resume is the
authority's (runs.authority.schedules_resume_action): a resume writes occurrences."""

from django.db import transaction
from django.db.models import F

from kernel.clock import authority_now
from kernel.errors import InvalidRequest
from schedule_services.lifecycle import pause_details
from schedules.audit import Actor, UNNAMED_API, audit_entry
from schedules.models import AuditAction, AuditEntry, BulkAction, Schedule, Tenant
from schedules.selectors import schedules_matching

BULK_BATCH = 500


def schedules_pause_matching(*, tenant: Tenant, labels: dict, job_type: str | None, until=None, reason: str = "",
                             actor: Actor = UNNAMED_API) -> BulkAction:
    """Pause the tenant's live schedules matching every label of `labels` and `job_type`
    that are not paused; the action counts (`paused`) and names (Schedule.pause_action)
    exactly those. An empty filter is refused: it would pause everything."""
    if not labels and job_type is None:
        raise InvalidRequest("filter must name at least one label or a jobType", field="filter")
    if until is not None and until <= authority_now():
        raise InvalidRequest("until must be a later instant than now", field="until")
    action = BulkAction.objects.create(
        tenant=tenant, filter={"labels": labels, "jobType": job_type}, paused_until=until, reason=reason,
        actor_kind=actor.kind, actor=actor.name,
    )
    matching = schedules_matching(tenant=tenant, labels=labels, job_type=job_type).filter(paused=False)
    after = ""
    while True:
        with transaction.atomic(durable=True):
            page = list(matching.filter(id__gt=after).order_by("id").values_list("id", flat=True)[:BULK_BATCH])
            if not page:
                return action
            after = page[-1]
            # Locked in id order, as every multi-schedule lock is; a row paused meanwhile is left out.
            batch = list(Schedule.objects.select_for_update().filter(id__in=page, paused=False, deleted_at__isnull=True)
                         .order_by("id").values_list("id", flat=True))
            if not batch:
                continue
            now = authority_now()
            # One set-based statement: every row gets the same pause.
            Schedule.objects.filter(id__in=batch).update(
                paused=True, paused_at=now, resume_from=F("next_run_at"), next_run_at=None, paused_until=until,
                pause_reason=reason, pause_action=action, updated_at=now,
            )
            details = pause_details(Schedule(paused_until=until, pause_reason=reason, pause_action=action))
            AuditEntry.objects.bulk_create([
                audit_entry(Schedule(id=schedule_id, tenant=tenant), actor=actor, action=AuditAction.PAUSE, at=now,
                            **details)
                for schedule_id in batch
            ])
            action.paused += len(batch)
            BulkAction.objects.filter(id=action.id).update(paused=action.paused)
