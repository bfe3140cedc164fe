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
from schedules.locks import lock_schedule, lock_tenant
from schedules.selectors import job_types_allowed
from scheduler_project.clock import authority_now
from scheduler_project.errors import (
    Contended,
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
    `admit(schedule=, job_type=, payload=, rule=)`, given, is the capacity admission of a
    strict start promise (runs.capacity.admission): called before the transaction, so no
    other writer waits for its forecast, its verdict (None, or an object whose confirm()
    raises a refusal or answers False when the forecast is out of date) is confirmed inside
    it, before anything is written.
    """
    job_type = JobType.objects.filter(name=spec.job_type, enabled=True).first()
    if job_type is None:
        valid = [allowed.name for allowed in job_types_allowed(tenant=tenant)]
        raise InvalidRequest(
            f"unknown job type {spec.job_type[:100]!r}; valid job types: {', '.join(valid) or 'none'}",
            field="jobType",
            details={"validJobTypes": valid},
        )
    schedule = Schedule(tenant=tenant, job_type=job_type, revision=1)
    spec = spec.anchored(authority_now()).keyed(schedule.id)
    payload = spec.payload_over(default_payload(job_type))
    validate_params(job_type, payload["params"])
    validate_retry(payload["retry"])
    if not tenant.allowed_job_types.filter(name=job_type.name).exists():
        raise JobTypeForbidden(f"this tenant may not use job type {job_type.name}")
    check_celery_task_allowed(tenant, job_type.name, payload["params"])

    schedule.bucket = due_bucket(schedule.id)
    _apply_payload(schedule, payload)
    for _ in range(ADMISSION_ATTEMPTS):
        # Outside any transaction: no other writer waits for the admission's forecast.
        admission = admit and admit(schedule=schedule, job_type=job_type, payload=payload, rule=spec.recurrence)
        try:
            return _create(tenant, schedule, payload, spec, admission, idempotency_key, request_hash, author_kind)
        except _AdmitAgain:
            continue
    raise _contended()


ADMISSION_ATTEMPTS = 5  # forecasts computed again while other strict promises keep being admitted meanwhile


class _AdmitAgain(Exception):
    """The admission's forecast is out of date: its transaction is rolled back, and it is computed again."""


def _contended() -> Contended:
    return Contended("other strict schedules were admitted while this one was checked; send the request again")


def _create(tenant, schedule, payload, spec, admission, idempotency_key, request_hash, author_kind):
    with transaction.atomic():
        lock_tenant(tenant)
        if idempotency_key:
            previous = RequestKey.objects.filter(tenant=tenant, scope="schedules", key=idempotency_key).first()
            if previous is not None:
                if previous.request_hash != request_hash:
                    raise IdempotencyConflict("this Idempotency-Key was used with a different request")
                return Schedule.objects.get(id=previous.resource_id), False
        now = authority_now()
        if admission is not None and not admission.confirm():  # a 409 precedes a 429
            raise _AdmitAgain
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
    `admit` as for schedule_create, with the edited schedule: computed on the revision read
    before the transaction, and again if another revision is current by then."""
    changes = changes.anchored(authority_now()).keyed(schedule_id)
    for _ in range(ADMISSION_ATTEMPTS):
        admission, seen = _edit_admission(admit, tenant, schedule_id, changes) if admit else (None, None)
        try:
            return _update(tenant, schedule_id, expected_revision, changes, author_kind, admit, admission, seen)
        except _AdmitAgain:
            continue
    raise _contended()


def _edit_admission(admit, tenant, schedule_id, changes) -> tuple[object, int | None]:
    """(the admission of the edit, the revision it was computed on), read without locks;
    (None, None) when there is nothing to read (the transaction answers why)."""
    schedule = Schedule.objects.filter(id=schedule_id, tenant=tenant, deleted_at__isnull=True).first()
    if schedule is None:
        return None, None
    seen = schedule.revision
    job_type = JobType.objects.get(name=schedule.job_type_id)
    current = ScheduleRevision.objects.get(schedule=schedule, revision=seen).payload
    payload = changes.payload_over(current)
    _apply_payload(schedule, payload)
    rule = changes.recurrence or recurrence.parse_rule(schedule.recurrence, default_anchor=schedule.created_at)
    return admit(schedule=schedule, job_type=job_type, payload=payload, rule=rule), seen


def _update(tenant, schedule_id, expected_revision, changes, author_kind, admit, admission, seen) -> Schedule:
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        job_type = JobType.objects.get(name=schedule.job_type_id)
        now = authority_now()
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
        if admit is not None and (seen != schedule.revision or (admission is not None and not admission.confirm())):
            raise _AdmitAgain
        schedule.revision += 1
        _apply_payload(schedule, payload)
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


def rule_warnings(rule: recurrence.Rule | None, after: datetime | None = None) -> list[dict]:
    """The answer's `warnings` about `rule` (today: `ambiguous_day_fields`), instants after `after` (default now)."""
    if rule is None:
        return []
    from schedules.recurrence.dialects import day_field_warnings

    return day_field_warnings(rule, after or authority_now())


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
