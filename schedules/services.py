"""Schedule writes: create, revise, pause, delete. Each is one transaction. Resume writes
occurrences (the misfire policy for what was missed), so it is the authority's."""

import zlib
from datetime import datetime

from django.conf import settings
from django.db import transaction

from schedules import recurrence
from schedules.celery_tasks import check_celery_task_allowed
from schedules.models import AuthorKind, JobType, RequestKey, Schedule, ScheduleRevision, Tenant
from schedules.specs import ScheduleSpec, default_payload, validate_params, validate_retry
from schedules.locks import lock_schedule
from schedules.selectors import job_types_allowed
from scheduler_project.clock import authority_now
from scheduler_project.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobTypeForbidden,
    QuotaExceeded,
    RevisionConflict,
)


def schedule_create(
    *,
    tenant: Tenant,
    spec: ScheduleSpec,
    idempotency_key: str | None = None,
    request_hash: str = "",
    author_kind: str = AuthorKind.API,
    admit=None,
) -> tuple[Schedule, bool]:
    """201 path of POST /schedules; precedence 400, 403 job type, replay, 409, 429.

    `request_hash` identifies the request that carried `idempotency_key`: a replay must match it.
    `author_kind` is recorded on the revision (who wrote it: the API or the admin).
    `admit(schedule=, job_type=, payload=, rule=)`, given, may refuse the schedule (raising)
    before anything is written: the capacity admission of a strict start promise.
    """
    job_type = JobType.objects.filter(name=spec.job_type, enabled=True).first()
    if job_type is None:
        valid = [allowed.name for allowed in job_types_allowed(tenant=tenant)]
        raise InvalidRequest(
            f"unknown job type {spec.job_type[:100]!r}; valid job types: {', '.join(valid) or 'none'}",
            field="jobType",
            details={"validJobTypes": valid},
        )
    spec = spec.anchored(authority_now())
    payload = spec.payload_over(default_payload(job_type))
    validate_params(job_type, payload["params"])
    validate_retry(payload["retry"])
    if not tenant.allowed_job_types.filter(name=job_type.name).exists():
        raise JobTypeForbidden(f"this tenant may not use job type {job_type.name}")
    check_celery_task_allowed(tenant, job_type.name, payload["params"])

    with transaction.atomic():
        # The tenant lock serializes creates: quota counts and key look-ups are exact.
        Tenant.objects.select_for_update().filter(id=tenant.id).first()
        if idempotency_key:
            previous = RequestKey.objects.filter(tenant=tenant, scope="schedules", key=idempotency_key).first()
            if previous is not None:
                if previous.request_hash != request_hash:
                    raise IdempotencyConflict("this Idempotency-Key was used with a different request")
                return Schedule.objects.get(id=previous.resource_id), False
        now = authority_now()
        schedule = Schedule(tenant=tenant, job_type=job_type, revision=1)
        schedule.bucket = due_bucket(schedule.id)
        _apply_payload(schedule, payload)
        if admit is not None:  # a 409 precedes a 429
            admit(schedule=schedule, job_type=job_type, payload=payload, rule=spec.recurrence)
        _check_schedule_quota(tenant)
        schedule.next_run_at = recurrence.first_not_before(spec.recurrence, now)
        schedule.save(force_insert=True)
        ScheduleRevision.objects.create(schedule=schedule, revision=1, payload=payload, author_kind=author_kind)
        if idempotency_key:
            RequestKey.objects.create(
                tenant=tenant, scope="schedules", key=idempotency_key, request_hash=request_hash,
                resource_id=schedule.id,
            )
    return schedule, True


def _check_schedule_quota(tenant: Tenant) -> None:
    """The tenant (locked) may hold at most max_schedules live schedules."""
    live = Schedule.objects.filter(tenant=tenant, deleted_at__isnull=True).count()
    if live >= tenant.max_schedules:
        raise QuotaExceeded(
            f"tenant has {live} schedules; its quota is {tenant.max_schedules}",
            details={"quota": "maxSchedules", "limit": tenant.max_schedules},
        )


def due_bucket(schedule_id: str) -> int:
    """The stable due bucket of a schedule: scanners can split the due index by it."""
    return zlib.crc32(schedule_id.encode()) % settings.DUE_BUCKETS


def schedule_update(
    *,
    tenant: Tenant,
    schedule_id: str,
    expected_revision: int,
    changes: ScheduleSpec,
    author_kind: str = AuthorKind.API,
    admit=None,
) -> Schedule:
    """PATCH with expectedRevision: one writer gets N+1, the other a RevisionConflict.
    `admit` as for schedule_create, with the edited schedule."""
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        job_type = JobType.objects.get(name=schedule.job_type_id)
        now = authority_now()
        changes = changes.anchored(now)
        current = ScheduleRevision.objects.get(schedule=schedule, revision=schedule.revision).payload
        payload = changes.payload_over(current)
        if changes.params is not None:
            validate_params(job_type, payload["params"])
            check_celery_task_allowed(tenant, job_type.name, payload["params"])
        validate_retry(payload["retry"])
        if expected_revision != schedule.revision:
            error = RevisionConflict(
                f"expectedRevision {expected_revision} is not current; the schedule is at revision {schedule.revision}"
            )
            error.current = schedule
            raise error
        schedule.revision += 1
        _apply_payload(schedule, payload)
        if admit is not None:
            rule = changes.recurrence or recurrence.parse_rule(schedule.recurrence, default_anchor=schedule.created_at)
            admit(schedule=schedule, job_type=job_type, payload=payload, rule=rule)
        if changes.recurrence is not None and not schedule.paused:
            # Only occurrences not yet materialized follow the new rule.
            if changes.recurrence.kind != "after_completion" or schedule.next_run_at is not None:
                schedule.next_run_at = recurrence.first_not_before(changes.recurrence, now)
        schedule.save()
        ScheduleRevision.objects.create(
            schedule=schedule, revision=schedule.revision, payload=payload, author_kind=author_kind
        )
    return schedule


def schedule_pause(*, tenant: Tenant, schedule_id: str) -> Schedule:
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        if not schedule.paused:
            now = authority_now()
            schedule.paused, schedule.paused_at = True, now
            schedule.resume_from, schedule.next_run_at = schedule.next_run_at, None
            schedule.save(update_fields=["paused", "paused_at", "resume_from", "next_run_at", "updated_at"])
    return schedule


def schedule_delete(*, tenant: Tenant, schedule_id: str) -> None:
    """Soft delete: the schedule stops and disappears; its runs stay readable."""
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        schedule.deleted_at = authority_now()
        schedule.next_run_at = None
        schedule.paused = False
        schedule.save(update_fields=["deleted_at", "next_run_at", "paused", "updated_at"])


def schedule_preview(*, rule: recurrence.Rule, after: datetime | None = None, count: int = 5) -> list[tuple]:
    """The next `count` instants of `rule` after `after` (default now), with local renderings."""
    if after is None:
        after = authority_now()
    rule = rule.anchored(after)
    # after_completion: one instant, the delay after a run that would end at `after`.
    instants = recurrence.preview(rule, after, 1 if rule.kind == "after_completion" else count)
    return [(instant, recurrence.local_rendering(rule, instant)) for instant in instants]


def _apply_payload(schedule: Schedule, payload: dict) -> None:
    schedule.name = payload["name"]
    schedule.params = payload["params"]
    schedule.recurrence = payload["recurrence"]
    schedule.misfire_policy = payload["misfirePolicy"]
    schedule.misfire_grace_seconds = payload["misfireGraceSeconds"]
    schedule.overlap_policy = payload["overlapPolicy"]
    schedule.retry_max_attempts = payload["retry"]["maxAttempts"]
    schedule.retry_initial_delay_seconds = payload["retry"]["initialDelaySeconds"]
    schedule.retry_max_delay_seconds = payload["retry"]["maxDelaySeconds"]
    schedule.effects = payload["effects"]
    schedule.start_deadline_seconds = payload.get("startDeadlineSeconds")
    schedule.jitter_seconds = payload.get("jitterSeconds") or 0
