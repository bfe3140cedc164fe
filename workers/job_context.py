"""The job context of a claimed run, wired to the authority: the tenant's name read on first
use, ``ctx.progress()`` written as the run's progress while the attempt owns it, and
``ctx.still_owner()`` asked of the ownership rule."""

from __future__ import annotations

import logging

from django.db import connection

from runs import authority
from runs.models import Run
from schedules.models import Tenant
from workers.jobs.framework import JobContext, JobControl, TransientJobError
from workers.leases import TRANSIENT_DB_ERRORS

log = logging.getLogger(__name__)


def context_for(run: Run, control: JobControl) -> JobContext:
    """The context of ``run``'s current attempt; reads nothing from the database until the job asks."""
    attempt = run.current_attempt
    payload = run.payload

    def write_progress(fraction: float, message: str) -> None:
        _write_progress(run.id, attempt.id, run.fence, fraction, message)

    def still_owns() -> bool:
        return _still_owns(run.id, attempt.id, run.fence)

    return JobContext(
        run_id=run.id,
        attempt_id=attempt.id,
        fence=run.fence,
        scheduled_at=run.scheduled_at,
        timezone=(run.schedule.recurrence or {}).get("timezone") or "UTC",
        params=dict(payload.get("params") or {}),
        control=control,
        attempt=attempt.number,
        job_type=payload.get("jobType") or run.job_type,
        tenant_id=run.tenant_id,
        tenant_loader=_tenant_name,
        progress_sink=write_progress,
        owner_check=still_owns,
    )


def _tenant_name(tenant_id: str) -> str:
    return Tenant.objects.filter(id=tenant_id).values_list("name", flat=True).first() or ""


def _write_progress(run_id: str, attempt_id: str, fence: int, fraction: float, message: str) -> None:
    """Progress is best effort: a database hiccup loses one report, never the job. A refused
    write (the attempt lost the run) is left to the heartbeat, which stops the job."""
    try:
        authority.record_progress(run_id=run_id, attempt_id=attempt_id, fence=fence, fraction=fraction,
                                  message=message)
    except TRANSIENT_DB_ERRORS as exc:
        log.warning("progress of run=%s not recorded: %s", run_id, exc)
        if not connection.in_atomic_block:
            connection.close()  # reconnect on the next query


def _still_owns(run_id: str, attempt_id: str, fence: int) -> bool:
    """Unreachable database: a retryable failure of the job, never a guess either way."""
    try:
        return authority.still_owns(run_id=run_id, attempt_id=attempt_id, fence=fence)
    except TRANSIENT_DB_ERRORS as exc:
        if not connection.in_atomic_block:
            connection.close()
        raise TransientJobError(f"ownership could not be checked: {exc}") from exc
