"""JSON shapes of the API's resources, exactly as the contract (API.md) names them."""


from kernel.clock import instant


def _number(value):
    """Seconds stored as floats read back as ints when they are whole (5, not 5.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def schedule_representation(schedule) -> dict:
    from schedules.selectors import schedule_ended, schedule_local_next_run
    from kernel.clock import authority_now

    return {
        "scheduleId": schedule.id,
        "name": schedule.name,
        "jobType": schedule.job_type_id,
        "jobTypeAvailable": schedule.job_type.enabled,
        "params": schedule.params,
        "recurrence": schedule.recurrence,
        "misfirePolicy": schedule.misfire_policy,
        "misfireGraceSeconds": schedule.misfire_grace_seconds,
        "overlapPolicy": schedule.overlap_policy,
        "retry": {
            "maxAttempts": schedule.retry_max_attempts,
            "initialDelaySeconds": _number(schedule.retry_initial_delay_seconds),
            "maxDelaySeconds": _number(schedule.retry_max_delay_seconds),
        },
        "effects": schedule.effects,
        "startDeadlineSeconds": schedule.start_deadline_seconds,
        "jitterSeconds": schedule.jitter_seconds,
        "concurrencyKey": schedule.concurrency_key or None,
        "activeFrom": instant(schedule.active_from),
        "activeUntil": instant(schedule.active_until),
        "endAfterOccurrences": schedule.end_after_occurrences,
        "occurrencesMaterialized": schedule.occurrences_materialized,
        "ended": schedule_ended(schedule, now=authority_now),
        "labels": schedule.labels,
        "calendar": schedule.calendar,
        "expectations": schedule.expectations,
        "revision": schedule.revision,
        "paused": schedule.paused,
        "pausedUntil": instant(schedule.paused_until) if schedule.paused else None,
        "pauseReason": (schedule.pause_reason or None) if schedule.paused else None,
        "pauseActionId": schedule.pause_action_id if schedule.paused else None,
        "nextRunAt": instant(schedule.next_run_at) if not schedule.paused else None,
        "nextRunAtLocal": schedule_local_next_run(schedule) if not schedule.paused else None,
        "createdAt": instant(schedule.created_at),
        "updatedAt": instant(schedule.updated_at),
    }


def schedule_detail_representation(schedule) -> dict:
    """One schedule as a create, edit, GET or revision conflict answers it: with the
    `warnings` about its rule (a list has none: they take instants to compute)."""
    from schedules.selectors import schedule_rule
    from schedule_services.lifecycle import rule_warnings

    return {**schedule_representation(schedule), "warnings": rule_warnings(schedule_rule(schedule))}


def preview_representation(instants) -> dict:
    """The preview answer from `schedule_preview`'s (instant, local rendering) pairs."""
    return {"instants": [_preview_entry(entry) for entry in instants]}


def _preview_entry(entry) -> dict:
    """One preview instant; a calendar's moved instant names where from (`shiftedFrom`), an
    excluded one (listed with includeExcluded) its calendar (`excluded`)."""
    at, local, moved, excluded = entry
    shown = {"at": instant(at), "local": local}
    if moved is not None:
        shown["shiftedFrom"] = instant(moved)
    if excluded is not None:
        shown["excluded"] = excluded
    return shown


def schedule_instants_representation(schedule, instants) -> dict:
    """A schedule's preview: each nominal instant (`at`) with the instant it is due (`dueAt`,
    after the schedule's jitter offset for it)."""
    from schedules.jitter import jittered

    return {"instants": [
        {**_preview_entry(entry), "dueAt": instant(jittered(schedule.id, entry[0], schedule.jitter_seconds))}
        for entry in instants
    ]}


REVISED_FIELDS = ("name", "params", "recurrence", "misfirePolicy", "misfireGraceSeconds", "overlapPolicy", "effects",
                  "startDeadlineSeconds", "jitterSeconds", "concurrencyKey", "activeFrom", "activeUntil",
                  "endAfterOccurrences", "calendar")


def revision_representation(revision) -> dict:
    """What one revision set, from its immutable payload, with who wrote it and when."""
    payload = revision.payload
    return {
        "revision": revision.revision,
        "createdAt": instant(revision.created_at),
        "authorKind": revision.author_kind,
        **{field: payload.get(field) for field in REVISED_FIELDS},
        "jitterSeconds": payload.get("jitterSeconds") or 0,
        "concurrencyKey": payload.get("concurrencyKey") or None,
        "labels": payload.get("labels") or {},
        "expectations": payload.get("expectations"),
        "retry": {key: _number(value) for key, value in payload.get("retry", {}).items()},
        "instantsDiff": revision.instants_diff,
    }


def audit_entry_representation(entry) -> dict:
    """One audit entry: when, who (`actorKind` api, admin or scheduler), what, on which schedule."""
    return {
        "at": instant(entry.at),
        "actor": entry.actor,
        "actorKind": entry.actor_kind,
        "action": entry.action,
        "scheduleId": entry.schedule_id,
        **entry.details,
    }


def job_type_representation(job_type, stats=None, expected_duration: float | None = None) -> dict:
    """The catalog entry; with `stats` (runs.capacity.statistics.RuntimeStats) its runtime
    statistics, and the duration forecasts expect of one run of it (`expected_duration`)."""
    return {
        "name": job_type.name,
        "resourceClass": job_type.resource_class,
        "paramsSchema": job_type.params_schema,
        "paramsSchemaVersion": job_type.params_schema_version,
        "leaseSeconds": job_type.default_lease_seconds,
        "timeoutSeconds": job_type.timeout_seconds,
        "retry": {
            "maxAttempts": job_type.max_attempts,
            "initialDelaySeconds": _number(job_type.initial_delay_seconds),
            "maxDelaySeconds": _number(job_type.max_delay_seconds),
        },
        "uncertainEffectPolicy": job_type.uncertain_effect_policy,
        **({"statistics": {**statistics_representation(stats), "expectedDurationSeconds": expected_duration}}
           if stats is not None else {}),
    }


def statistics_representation(stats) -> dict:
    from django.conf import settings

    return {
        "windowSeconds": settings.CAPACITY_STATS_WINDOW_SECONDS,
        "samples": stats.samples,
        "durationSeconds": stats.duration,
        "queueDelaySeconds": stats.queue_delay,
    }


def schedule_statistics_representation(schedule, stats, own_duration, job_type_stats) -> dict:
    """A schedule's runtime statistics (`stats`) and the duration forecasts expect of one of
    its runs: `own_duration` (statistics.schedule_durations) or, without enough history, its
    job type's."""
    from django.conf import settings

    expected = own_duration if own_duration is not None else job_type_stats.expected_duration()
    return {
        "scheduleId": schedule.id,
        "jobType": schedule.job_type_id,
        **statistics_representation(stats),
        "minSamples": settings.CAPACITY_SCHEDULE_MIN_SAMPLES,
        "expectedDurationSeconds": expected,
        "expectedDurationSource": "schedule" if own_duration is not None else "jobType",
    }


def attempt_representation(attempt, replay: dict | None = None) -> dict:
    """``replay``: the replay this attempt is the first of (run_replays_by_attempt)."""
    return {
        "attemptId": attempt.id,
        "number": attempt.number,
        "state": attempt.state,
        "startedAt": instant(attempt.started_at),
        "finishedAt": instant(attempt.finished_at),
        "error": attempt.error or None,
        "reason": attempt.reason or None,
        "replay": None if replay is None else {"at": replay["at"], "actor": replay["actor"], "note": replay["note"]},
    }


def run_replays_by_attempt(run) -> dict[int, dict]:
    """Each replay of the run by the number of the first attempt it started."""
    return {replay["afterAttempt"] + 1: replay for replay in run.replays or ()}


def run_result_representation(run) -> dict | None:
    if run.state != "succeeded" or not run.result_checksum:
        return None
    return {
        "checksum": run.result_checksum,
        "size": run.result_size,
        "contentType": run.result_content_type,
    }


def run_progress_representation(run) -> dict | None:
    """The job's last reported progress, if the run's latest attempt reported any. A succeeded
    run reads complete as of its finish (a job seldom reports its very last step), with the
    job's last message; a failed or canceled one keeps where it stopped. Derived here, so
    completion writes nothing more."""
    if run.progress_at is None or run.progress_attempt != run.attempt_count:
        return None
    if run.state == "succeeded":
        return {"fraction": 1.0, "message": run.progress_message, "updatedAt": instant(run.finished_at)}
    return {"fraction": run.progress_fraction, "message": run.progress_message, "updatedAt": instant(run.progress_at)}


def run_pending_reason(run, unavailable: frozenset[str] | None = None,
                       key_bound: frozenset[str] | None = None) -> str | None:
    """Why a waiting run is not claimed: its own reason, or that its job type has no
    declaration any more (`unavailable`: schedules.selectors.unavailable_job_types, read here
    when not given), which keeps it waiting whatever else it waits for, or that its
    concurrency key is full (`key_bound`: runs.selectors.waiting_on_key, read here when not
    given)."""
    from runs.models import CONCURRENCY_KEY, JOB_TYPE_UNAVAILABLE, RunState
    from runs.selectors import waiting_on_key
    from schedules.selectors import unavailable_job_types

    if run.state in (RunState.PENDING, RunState.QUEUED):
        if run.job_type in (unavailable if unavailable is not None else unavailable_job_types()):
            return JOB_TYPE_UNAVAILABLE
    if run.state == RunState.QUEUED and run.id in (key_bound if key_bound is not None else waiting_on_key([run])):
        return CONCURRENCY_KEY
    return run.pending_reason or None


def run_representation(run, unavailable: frozenset[str] | None = None,
                       key_bound: frozenset[str] | None = None) -> dict:
    """``run`` as read by runs.selectors.with_details (a write's run: run_reread)."""
    replays = run_replays_by_attempt(run)
    return {
        "runId": run.id,
        "scheduleId": run.schedule_id,
        "revision": run.revision,
        "trigger": run.trigger,
        "backfilled": run.backfilled,
        "jobType": run.job_type,
        "state": run.state,
        "pendingReason": run_pending_reason(run, unavailable, key_bound),
        "attempt": run.attempt_count,
        "maxAttempts": run.max_attempts,
        "scheduledAt": instant(run.scheduled_at),
        "dueAt": instant(run.due_at),
        "startedAt": instant(run.started_at),
        "finishedAt": instant(run.finished_at),
        "skipReason": run.skip_reason or None,
        "shiftedFrom": instant(run.shifted_from),
        "note": run.note or None,
        "skippedCount": run.skipped_count,
        "skippedThrough": instant(run.skipped_through),
        "cancellationRequested": run.cancellation_requested,
        "cancellationAccepted": run.cancellation_accepted,
        "error": run.error or None,
        "attempts": [attempt_representation(attempt, replays.get(attempt.number)) for attempt in run.attempt_list],
        "result": run_result_representation(run),
        "progress": run_progress_representation(run),
        "effects": [
            {"action": intent.action, "kind": intent.kind, "state": intent.state, "reason": intent.reason or None}
            for intent in run.effect_list
        ],
        "replays": list(run.replays or []),
        "createdAt": instant(run.created_at),
    }
