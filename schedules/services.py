"""Schedule writes: create, revise, pause, resume, delete. Each is one transaction."""

import zlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from schedules import recurrence
from schedules.models import JobType, RequestKey, Schedule, ScheduleRevision, Tenant
from schedules.validation import (
    parse_effects,
    parse_instant,
    parse_name,
    parse_policies,
    parse_recurrence,
    parse_retry,
    reject_unknown,
    require_int,
    require_object,
    validate_params,
)
from runs.authority.locks import lock_schedule
from runs.authority.materialize import catch_up_on_resume
from runs.authority.operations import request_hash
from runs.clock import authority_now
from runs.models import ACTIVE_STATES, Trigger
from scheduler_project.errors import (
    IdempotencyConflict,
    InvalidRequest,
    JobTypeForbidden,
    QuotaExceeded,
    RevisionConflict,
)

CREATE_FIELDS = {
    "name", "jobType", "params", "recurrence", "misfirePolicy", "misfireGraceSeconds",
    "overlapPolicy", "retry", "effects",
}
UPDATE_FIELDS = (CREATE_FIELDS - {"jobType"}) | {"expectedRevision"}
DEFAULT_POLICIES = {"misfirePolicy": "latest_only", "misfireGraceSeconds": 60, "overlapPolicy": "buffer_one"}
PREVIEW_MAX = 100


def schedule_create(*, tenant: Tenant, body: dict, idempotency_key: str | None = None) -> tuple[Schedule, bool]:
    """201 path of POST /schedules; precedence 400, 403 job type, replay, 409, 429."""
    require_object(body, "")
    reject_unknown(body, CREATE_FIELDS, "")
    for required in ("name", "jobType", "recurrence"):
        if required not in body:
            raise InvalidRequest(f"{required} is required", field=required)
    name = parse_name(body["name"])
    if not isinstance(body["jobType"], str):
        raise InvalidRequest("jobType must be a string", field="jobType")
    job_type = JobType.objects.filter(name=body["jobType"], enabled=True).first()
    if job_type is None:
        raise InvalidRequest(f"unknown job type {body['jobType'][:100]!r}", field="jobType")
    now = authority_now()
    rule = parse_recurrence(body["recurrence"], default_anchor=now)
    params = require_object(body.get("params", {}), "params")
    validate_params(job_type, params)
    spec = {
        "name": name,
        "jobType": job_type.name,
        "params": params,
        "recurrence": rule.to_dict(),
        **parse_policies(body, DEFAULT_POLICIES),
        "retry": parse_retry(body.get("retry"), job_type),
        "effects": parse_effects(body.get("effects")),
    }
    if not tenant.allowed_job_types.filter(name=job_type.name).exists():
        raise JobTypeForbidden(f"this tenant may not use job type {job_type.name}")

    digest = request_hash(body)
    with transaction.atomic():
        # The tenant lock serializes creates: quota counts and key look-ups are exact.
        Tenant.objects.select_for_update().filter(id=tenant.id).first()
        if idempotency_key:
            previous = RequestKey.objects.filter(tenant=tenant, scope="schedules", key=idempotency_key).first()
            if previous is not None:
                if previous.request_hash != digest:
                    raise IdempotencyConflict("this Idempotency-Key was used with a different request")
                return Schedule.objects.get(id=previous.resource_id), False
        live = Schedule.objects.filter(tenant=tenant, deleted_at__isnull=True).count()
        if live >= tenant.max_schedules:
            raise QuotaExceeded(
                f"tenant has {live} schedules; its quota is {tenant.max_schedules}",
                details={"quota": "maxSchedules", "limit": tenant.max_schedules},
            )
        now = authority_now()
        schedule = Schedule(tenant=tenant, job_type=job_type, revision=1)
        schedule.bucket = due_bucket(schedule.id)
        _apply_spec(schedule, spec)
        schedule.next_run_at = _first_instant(rule, now)
        schedule.save(force_insert=True)
        ScheduleRevision.objects.create(schedule=schedule, revision=1, payload=spec)
        if idempotency_key:
            RequestKey.objects.create(
                tenant=tenant, scope="schedules", key=idempotency_key, request_hash=digest, resource_id=schedule.id
            )
    return schedule, True


def due_bucket(schedule_id: str) -> int:
    """The stable due bucket of a schedule: scanners can split the due index by it."""
    return zlib.crc32(schedule_id.encode()) % settings.DUE_BUCKETS


def schedule_update(*, tenant: Tenant, schedule_id: str, body: dict) -> Schedule:
    """PATCH with expectedRevision: one writer gets N+1, the other a RevisionConflict."""
    require_object(body, "")
    reject_unknown(body, UPDATE_FIELDS, "")
    if "expectedRevision" not in body:
        raise InvalidRequest("expectedRevision is required", field="expectedRevision")
    expected = require_int(body["expectedRevision"], "expectedRevision", 1, 2**31 - 1)
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        job_type = JobType.objects.get(name=schedule.job_type_id)
        now = authority_now()
        current = ScheduleRevision.objects.get(schedule=schedule, revision=schedule.revision).payload
        spec = dict(current)
        if "name" in body:
            spec["name"] = parse_name(body["name"])
        if "params" in body:
            spec["params"] = require_object(body["params"], "params")
            validate_params(job_type, spec["params"])
        rule_changed = "recurrence" in body
        if rule_changed:
            spec["recurrence"] = parse_recurrence(body["recurrence"], default_anchor=now).to_dict()
        spec.update(parse_policies(body, {k: current[k] for k in DEFAULT_POLICIES}))
        if "retry" in body:
            spec["retry"] = parse_retry({**current["retry"], **require_object(body["retry"], "retry")}, job_type)
        if "effects" in body:
            spec["effects"] = parse_effects(body["effects"])
        if expected != schedule.revision:
            error = RevisionConflict(
                f"expectedRevision {expected} is not current; the schedule is at revision {schedule.revision}"
            )
            error.current = schedule
            raise error
        schedule.revision += 1
        _apply_spec(schedule, spec)
        if rule_changed and not schedule.paused:
            rule = recurrence.parse_rule(spec["recurrence"])
            # Only occurrences not yet materialized follow the new rule.
            if rule.kind != "after_completion" or schedule.next_run_at is not None:
                schedule.next_run_at = _first_instant(rule, now)
        schedule.save()
        ScheduleRevision.objects.create(schedule=schedule, revision=schedule.revision, payload=spec)
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


def schedule_resume(*, tenant: Tenant, schedule_id: str) -> Schedule:
    """Resume applies the misfire policy to the instants missed while paused."""
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        if not schedule.paused:
            return schedule
        now = authority_now()
        rule = recurrence.parse_rule(schedule.recurrence)
        schedule.paused = False
        if schedule.resume_from is not None and schedule.resume_from <= now:
            catch_up_on_resume(schedule, now)  # sets next_run_at past the missed instants
        elif schedule.resume_from is not None:
            schedule.next_run_at = schedule.resume_from
        elif rule.kind != "after_completion" or not schedule.runs.filter(
            trigger=Trigger.SCHEDULE, state__in=ACTIVE_STATES
        ).exists():
            # An after_completion schedule whose last run ended while paused is due now.
            schedule.next_run_at = _first_instant(rule, now)
        schedule.paused_at = schedule.resume_from = None
        schedule.save()
    return schedule


def schedule_delete(*, tenant: Tenant, schedule_id: str) -> None:
    """Soft delete: the schedule stops and disappears; its runs stay readable."""
    with transaction.atomic():
        schedule = lock_schedule(schedule_id, tenant=tenant)
        schedule.deleted_at = authority_now()
        schedule.next_run_at = None
        schedule.paused = False
        schedule.save(update_fields=["deleted_at", "next_run_at", "paused", "updated_at"])


def schedule_preview(*, body: dict) -> list[tuple]:
    require_object(body, "")
    reject_unknown(body, {"recurrence", "count", "after"}, "")
    if "recurrence" not in body:
        raise InvalidRequest("recurrence is required", field="recurrence")
    count = require_int(body.get("count", 5), "count", 1, PREVIEW_MAX)
    after = parse_instant(body["after"], "after") if body.get("after") is not None else authority_now()
    rule = parse_recurrence(body["recurrence"], default_anchor=after)
    if rule.kind == "after_completion":
        instants = [after + timedelta(seconds=rule.delay_seconds)]
    else:
        instants = recurrence.preview(rule, after, count)
    return [(instant, recurrence.local_rendering(rule, instant)) for instant in instants]


def _first_instant(rule: recurrence.Rule, now):
    """The first instant not before ``now``; an after_completion schedule is due at once."""
    if rule.kind == "after_completion":
        return now
    return recurrence.next_after(rule, now - timedelta(microseconds=1))


def _apply_spec(schedule: Schedule, spec: dict) -> None:
    schedule.name = spec["name"]
    schedule.params = spec["params"]
    schedule.recurrence = spec["recurrence"]
    schedule.misfire_policy = spec["misfirePolicy"]
    schedule.misfire_grace_seconds = spec["misfireGraceSeconds"]
    schedule.overlap_policy = spec["overlapPolicy"]
    schedule.retry_max_attempts = spec["retry"]["maxAttempts"]
    schedule.retry_initial_delay_seconds = spec["retry"]["initialDelaySeconds"]
    schedule.retry_max_delay_seconds = spec["retry"]["maxDelaySeconds"]
    schedule.effects = spec["effects"]
