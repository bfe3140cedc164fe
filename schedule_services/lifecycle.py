"""Schedule writes: create, revise, pause, delete. Each is one durable transaction; every create
and revision passes strict-start admission (runs.capacity.admission) inside it. Resume writes
occurrences (the misfire policy for what was missed), so it is the authority's."""

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from kernel.clock import authority_now, instant
from kernel.errors import (
    Contended, IdempotencyConflict, InvalidRequest, JobTypeForbidden, QuotaExceeded, RevisionConflict,
)
from runs.authority.locks import lock_schedule, lock_tenant
from runs.capacity.admission import admit_start_deadline
from schedule_services.directives import instants_diff, reconcile_directives
from schedules import recurrence
from schedules.audit import Actor, UNNAMED_API, audit_record
from schedules.calendars import index_schedule_calendars, rule_bound, schedule_calendar_rule
from schedules.celery_task_allowlist import check_celery_task_allowed
from schedules.models import (
    AuditAction, JobType, OccurrenceDirective, RequestKey, Schedule, ScheduleLabel, ScheduleRevision, Tenant,
)
from schedules.selectors import job_types_allowed, schedule_first_due, schedule_rule
from schedules.specs import (
    ScheduleSpec, default_payload, payload_window, validate_params, validate_retry, validate_window,
)


def schedule_create(
    *,
    tenant: Tenant,
    spec: ScheduleSpec,
    idempotency_key: str | None = None,
    request_hash: str = "",
    actor: Actor = UNNAMED_API,
) -> tuple[Schedule, bool]:
    """201 path of POST /schedules; precedence 400, 403 job type, replay, 409, 429.

    `request_hash` identifies the request that carried `idempotency_key`: a replay must match it.
    `actor` is recorded on the revision (its kind: the API or the admin) and in the audit.
    Every create passes the capacity admission of a strict start promise
    (``admit_start_deadline``), whoever calls: computed before the transaction, so no other
    writer waits for its forecast, and confirmed inside it, before anything is written.
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
    validate_window(payload)
    if not tenant.allowed_job_types.filter(name=job_type.name).exists():
        raise JobTypeForbidden(f"this tenant may not use job type {job_type.name}")
    check_celery_task_allowed(tenant, job_type.name, payload["params"])

    schedule.bucket = due_bucket(schedule.id)
    _apply_payload(schedule, payload)
    for _ in range(ADMISSION_ATTEMPTS):
        # Outside any transaction: no other writer waits for the admission's forecast.
        admission = admit_start_deadline(schedule=schedule, job_type=job_type, payload=payload, rule=spec.recurrence)
        try:
            return _create(tenant, schedule, payload, spec, admission, idempotency_key, request_hash, actor)
        except _AdmitAgain:
            continue
    raise _contended()


_MICROSECOND = timedelta(microseconds=1)
ADMISSION_ATTEMPTS = 5  # forecasts computed again while other strict promises keep being admitted meanwhile


class _AdmitAgain(Exception):
    """The admission's forecast is out of date: its transaction is rolled back, and it is computed again."""


def _contended() -> Contended:
    return Contended("other strict schedules were admitted while this one was checked; send the request again")


def _create(tenant, schedule, payload, spec, admission, idempotency_key, request_hash, actor):
    with transaction.atomic(durable=True):
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
        if spec.concurrency_key:
            _uses_concurrency_keys(tenant)
        rule = rule_bound(schedule_calendar_rule(spec.recurrence, schedule.calendar), tenant.id, strict=True)
        schedule.next_run_at = schedule_first_due(schedule, rule, now)
        schedule.next_run_from = now - _MICROSECOND
        schedule.save(force_insert=True)
        ScheduleRevision.objects.create(schedule=schedule, revision=1, payload=payload, author_kind=actor.kind)
        _index_labels(schedule, replace=False)
        index_schedule_calendars(schedule, rule)
        audit_record(schedule, actor=actor, action=AuditAction.CREATE, at=now, revision=1)
        if idempotency_key:
            RequestKey.objects.create(
                tenant=tenant, scope="schedules", key=idempotency_key, request_hash=request_hash,
                resource_id=schedule.id,
            )
    return schedule, True


def _uses_concurrency_keys(tenant: Tenant) -> None:
    """From now on the tenant's claims read its concurrency keys (runs.authority.claims)."""
    Tenant.objects.filter(id=tenant.id, uses_concurrency_keys=False).update(uses_concurrency_keys=True)


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


@dataclass
class Edit:
    """What an edit stored (or, a dry run, would store): the schedule at its new revision,
    the instants it adds and removes over the next 30 days, and the directives it orphaned."""

    schedule: Schedule
    instants_diff: dict
    orphaned: list[OccurrenceDirective]
    stored: bool


def schedule_update(**arguments) -> Schedule:
    """schedule_edit, answering the schedule at its new revision."""
    return schedule_edit(**arguments).schedule


def schedule_edit(
    *,
    tenant: Tenant,
    schedule_id: str,
    expected_revision: int,
    changes: ScheduleSpec,
    actor: Actor = UNNAMED_API,
    dry_run: bool = False,
) -> Edit:
    """PATCH with expectedRevision: one writer gets N+1, the other a RevisionConflict.
    The admission as for schedule_create, with the edited schedule: computed on the revision
    read before the transaction, and again if another revision is current by then. A dry run
    checks and computes everything an edit does, in a transaction rolled back."""
    changes = changes.anchored(authority_now()).keyed(schedule_id)
    for _ in range(ADMISSION_ATTEMPTS):
        admission, seen = _edit_admission(tenant, schedule_id, changes)
        try:
            return _update(tenant, schedule_id, expected_revision, changes, actor, admission, seen, dry_run)
        except _AdmitAgain:
            continue
    raise _contended()


def _edit_admission(tenant, schedule_id, changes) -> tuple[object, int | None]:
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
    return admit_start_deadline(schedule=schedule, job_type=job_type, payload=payload, rule=rule), seen


def _update(tenant, schedule_id, expected_revision, changes, actor, admission, seen, dry_run) -> Edit:
    with transaction.atomic(durable=True):
        if changes.concurrency_key:
            _uses_concurrency_keys(tenant)  # the tenant's row before the schedule's: the lock order
        schedule = lock_schedule(schedule_id, tenant=tenant)
        job_type = JobType.objects.get(name=schedule.job_type_id)
        now = authority_now()
        current = ScheduleRevision.objects.get(schedule=schedule, revision=schedule.revision).payload
        payload = changes.payload_over(current)
        if changes.params is not None:
            validate_params(job_type, payload["params"])
            check_celery_task_allowed(tenant, job_type.name, payload["params"])
        validate_retry(payload["retry"])
        validate_window(payload)
        # The rule under the edited calendars (400 for a policy it cannot take, 404 for another
        # tenant's calendar: both before a 409). None: a row stored under older, looser rules,
        # kept by an edit that does not give one.
        rule = changes.recurrence or _stored_rule(schedule)
        if rule is not None:
            calendar = payload.get("calendar")
            if rule.kind == "after_completion" and calendar:
                raise InvalidRequest("calendar does not apply to an after_completion recurrence", field="calendar")
            rule = rule_bound(schedule_calendar_rule(rule, calendar), tenant.id, strict=True)
        if expected_revision != schedule.revision:
            error = RevisionConflict(
                f"expectedRevision {expected_revision} is not current; the schedule is at revision {schedule.revision}"
            )
            error.current = schedule
            raise error
        if seen != schedule.revision or (admission is not None and not admission.confirm()):
            raise _AdmitAgain
        schedule.revision += 1
        rule_before = schedule_rule(schedule)
        _apply_payload(schedule, payload)
        diff = instants_diff(rule_before, schedule_rule(schedule), now)
        window_changed = changes.cleared or any(
            value is not None for value in (changes.active_from, changes.active_until, changes.end_after_occurrences,
                                            changes.calendar))
        if rule is not None and (changes.recurrence is not None or window_changed) and not schedule.paused:
            # Only occurrences not yet materialized follow the new rule and window; a schedule
            # that ended revives when the edit gives it instants again. (An after_completion
            # schedule with a run unfinished is given its next instant when that run ends.)
            if rule.kind != "after_completion" or schedule.next_run_at is not None or (
                    window_changed and not schedule.runs.filter(finished_at__isnull=True, trigger="schedule").exists()):
                schedule.next_run_at = schedule_first_due(schedule, rule, now)
                schedule.next_run_from = now - _MICROSECOND
        schedule.save()
        ScheduleRevision.objects.create(
            schedule=schedule, revision=schedule.revision, payload=payload, author_kind=actor.kind,
            instants_diff=diff,
        )
        if changes.labels is not None:
            _index_labels(schedule)
        if rule is not None:
            index_schedule_calendars(schedule, rule)
        orphaned = reconcile_directives(schedule, now)
        audit_record(schedule, actor=actor, action=AuditAction.UPDATE, at=now, revision=schedule.revision)
        if dry_run:
            transaction.set_rollback(True)  # everything checked and computed; nothing stored
    return Edit(schedule, diff, orphaned, stored=not dry_run)


NOT_GIVEN = object()


def schedule_pause(*, tenant: Tenant, schedule_id: str, until=NOT_GIVEN, reason=NOT_GIVEN,
                   actor: Actor = UNNAMED_API) -> Schedule:
    """Pause; with `until` (an instant after now, authority time) the pause ends by itself then
    (runs.authority.resume_due_pauses). On a paused schedule the given `until` (None: no end)
    and `reason` replace the pause's, and the pause becomes this request's (no bulk action's
    resume ends it); given nothing, a paused schedule is left as it is."""
    with transaction.atomic(durable=True):
        schedule = lock_schedule(schedule_id, tenant=tenant)
        now = authority_now()
        if until is not NOT_GIVEN and until is not None and until <= now:
            raise InvalidRequest("until must be a later instant than now", field="until")
        if schedule.paused and until is NOT_GIVEN and reason is NOT_GIVEN:
            return schedule
        if not schedule.paused:
            schedule.paused, schedule.paused_at = True, now
            schedule.resume_from, schedule.next_run_at = schedule.next_run_at, None
            schedule.paused_until, schedule.pause_reason = None, ""
        if until is not NOT_GIVEN:
            schedule.paused_until = until
        if reason is not NOT_GIVEN:
            schedule.pause_reason = reason or ""
        schedule.pause_action = None
        schedule.save(update_fields=[*PAUSE_FIELDS, "updated_at"])
        audit_record(schedule, actor=actor, action=AuditAction.PAUSE, at=now, **pause_details(schedule))
    return schedule


# What a pause writes on the schedule (a resume clears them).
PAUSE_FIELDS = ("paused", "paused_at", "resume_from", "next_run_at", "paused_until", "pause_reason", "pause_action")


def pause_details(schedule: Schedule) -> dict:
    """The audit details of a pause: its end, reason and bulk action, those it has."""
    return {"until": instant(schedule.paused_until), "reason": schedule.pause_reason or None,
            "actionId": schedule.pause_action_id}


def schedule_delete(*, tenant: Tenant, schedule_id: str, actor: Actor = UNNAMED_API) -> None:
    """Soft delete: the schedule stops and disappears; its runs stay readable."""
    with transaction.atomic(durable=True):
        schedule = lock_schedule(schedule_id, tenant=tenant)
        schedule.deleted_at = authority_now()
        schedule.next_run_at = None
        schedule.paused, schedule.paused_until, schedule.pause_action = False, None, None
        schedule.save(update_fields=["deleted_at", "next_run_at", "paused", "paused_until", "pause_action",
                                     "updated_at"])
        audit_record(schedule, actor=actor, action=AuditAction.DELETE, at=schedule.deleted_at)


def _index_labels(schedule: Schedule, *, replace: bool = True) -> None:
    """The ScheduleLabel rows of `schedule.labels` (saved), in the caller's transaction."""
    if replace:
        ScheduleLabel.objects.filter(schedule=schedule).delete()
    ScheduleLabel.objects.bulk_create([
        ScheduleLabel(schedule=schedule, tenant_id=schedule.tenant_id, key=key, value=value)
        for key, value in schedule.labels.items()
    ])


def schedule_preview(*, rule: recurrence.Rule, after: datetime | None = None, count: int = 5,
                     include_excluded: bool = False, tenant: Tenant | None = None) -> list[tuple]:
    """The next `count` instants of `rule` (in its window) after `after` (default now), as
    (instant, local rendering, shifted from, excluded by): see recurrence.preview_entries.
    With `tenant`, the calendars the rule names are read (404 when not the tenant's)."""
    if after is None:
        after = authority_now()
    rule = rule.anchored(after)
    if tenant is not None:
        rule = rule_bound(rule, tenant.id, strict=True)
    # after_completion: one instant, the delay after a run that would end at `after`.
    entries = recurrence.preview_entries(rule, after, 1 if rule.kind == "after_completion" else count,
                                         include_excluded=include_excluded)
    return [(instant, recurrence.local_rendering(rule, instant), moved, excluded)
            for instant, moved, excluded in entries]


def rule_warnings(rule: recurrence.Rule | None, after: datetime | None = None) -> list[dict]:
    """The answer's `warnings` about `rule` (today: `ambiguous_day_fields`), instants after `after` (default now)."""
    if rule is None:
        return []
    from schedules.recurrence.dialects import day_field_warnings

    return day_field_warnings(rule, after or authority_now())


def _stored_rule(schedule: Schedule) -> recurrence.Rule | None:
    try:
        return recurrence.parse_rule(schedule.recurrence, default_anchor=schedule.created_at)
    except recurrence.RecurrenceError:
        return None


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
    schedule.concurrency_key = payload.get("concurrencyKey") or ""
    schedule.active_from, schedule.active_until, schedule.end_after_occurrences = payload_window(payload)
    schedule.labels = payload.get("labels") or {}
    schedule.calendar = payload.get("calendar") or None
    expectations = payload.get("expectations") or None
    schedule.expectations = expectations
    schedule.expect_start_within_seconds = (expectations or {}).get("startWithinSeconds")
    schedule.expect_finish_within_seconds = (expectations or {}).get("finishWithinSeconds")
    schedule.expect_max_consecutive_failures = (expectations or {}).get("maxConsecutiveFailures")
