"""A schedule's fields as the API edge hands them over, and the checks that need its job type.

The edge (`scheduler_project/http/schedule_requests.py`) checks each field's shape and
limits; what depends on the database (the job type's params schema and retry defaults)
is checked here, by the services.
"""

from dataclasses import dataclass, replace
from datetime import datetime

from schedules.models import JobType
from schedules.recurrence import Rule, parse_instant
from kernel.clock import instant
from kernel.errors import InvalidRequest

DEFAULT_POLICIES = {"misfirePolicy": "latest_only", "misfireGraceSeconds": 60, "overlapPolicy": "buffer_one"}


@dataclass(frozen=True)
class ScheduleSpec:
    """The fields of a schedule create or edit, each valid on its own. None means not given:
    an edit keeps the current value, a create takes the default. `retry` holds the given
    subset of its keys; `effects` is stored as given ({} clears them)."""

    name: str | None = None
    job_type: str | None = None
    params: dict | None = None
    recurrence: Rule | None = None
    misfire_policy: str | None = None
    misfire_grace_seconds: int | None = None
    overlap_policy: str | None = None
    retry: dict | None = None
    effects: dict | None = None
    start_deadline_seconds: int | None = None  # 0: remove the promise (an edit's null)
    jitter_seconds: int | None = None
    concurrency_key: str | None = None  # "": no key (an edit's null)
    active_from: datetime | None = None
    active_until: datetime | None = None
    end_after_occurrences: int | None = None
    cleared: frozenset = frozenset()  # payload keys an edit set to null (window fields, calendar)
    labels: dict | None = None  # replaces every label ({} clears them)
    calendar: dict | None = None  # {"calendarIds", "policy"}; "calendar" in `cleared`: removed
    expectations: dict | None = None  # replaces them ({} removes them)

    def anchored(self, now: datetime) -> "ScheduleSpec":
        """An interval rule given without an anchor starts at `now`, the authority's time of the write."""
        if self.recurrence is None:
            return self
        return replace(self, recurrence=self.recurrence.anchored(now))

    def keyed(self, schedule_id: str) -> "ScheduleSpec":
        """A cron rule's `H` is fixed by the schedule's id: a stored rule carries it as `hashKey`."""
        if self.recurrence is None:
            return self
        return replace(self, recurrence=self.recurrence.keyed(schedule_id))

    def payload_over(self, base: dict) -> dict:
        """The revision payload: the given fields over `base` (the current payload or the defaults)."""
        given = {
            "name": self.name,
            "jobType": self.job_type,
            "params": self.params,
            "recurrence": self.recurrence.to_dict() if self.recurrence is not None else None,
            "misfirePolicy": self.misfire_policy,
            "misfireGraceSeconds": self.misfire_grace_seconds,
            "overlapPolicy": self.overlap_policy,
            "retry": {**base["retry"], **self.retry} if self.retry is not None else None,
            "effects": self.effects,
            "startDeadlineSeconds": self.start_deadline_seconds,
            "jitterSeconds": self.jitter_seconds,
            "concurrencyKey": self.concurrency_key,
            "activeFrom": instant(self.active_from) if self.active_from is not None else None,
            "activeUntil": instant(self.active_until) if self.active_until is not None else None,
            "endAfterOccurrences": self.end_after_occurrences,
            "labels": self.labels,
            "calendar": self.calendar,
            "expectations": self.expectations,
        }
        payload = {**base, **{key: value for key, value in given.items() if value is not None}}
        if payload.get("expectations") == {}:
            payload.pop("expectations")
        if payload.get("startDeadlineSeconds") == 0:
            payload["startDeadlineSeconds"] = None
        for key in self.cleared:
            payload.pop(key, None)
        return payload


def payload_window(payload: dict) -> tuple[datetime | None, datetime | None, int | None]:
    """(activeFrom, activeUntil, endAfterOccurrences) of a revision payload; None where open."""
    active_from, active_until = payload.get("activeFrom"), payload.get("activeUntil")
    return (parse_instant(active_from) if active_from else None, parse_instant(active_until) if active_until else None,
            payload.get("endAfterOccurrences"))


def validate_window(payload: dict) -> None:
    """The window of a create, or of an edit over the current one, must be ordered."""
    active_from, active_until, _ = payload_window(payload)
    if active_from is not None and active_until is not None and active_until <= active_from:
        raise InvalidRequest("activeUntil must be after activeFrom", field="activeUntil")


def default_payload(job_type: JobType) -> dict:
    """What a new schedule of `job_type` holds where its create request is silent."""
    retry = {
        "maxAttempts": job_type.max_attempts,
        "initialDelaySeconds": job_type.initial_delay_seconds,
        "maxDelaySeconds": job_type.max_delay_seconds,
    }
    return {"params": {}, **DEFAULT_POLICIES, "retry": retry, "effects": {}}


def validate_params(job_type: JobType, params: dict) -> None:
    """Params against the job type's versioned schema."""
    import jsonschema  # here, not at the top: worker processes never validate params (3 MiB each)

    validator = jsonschema.Draft202012Validator(
        job_type.params_schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(params))
    if error is None:
        return
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(params) - set(job_type.params_schema.get("properties", {})))
        path = extra[0] if extra else path
    raise InvalidRequest(f"params: {error.message}", field="params" + (f".{path}" if path else ""))


def validate_retry(retry: dict) -> None:
    """The given delays over the job type's defaults must still make a backoff."""
    if retry["maxDelaySeconds"] < retry["initialDelaySeconds"]:
        raise InvalidRequest(
            "retry.maxDelaySeconds must not be below initialDelaySeconds", field="retry.maxDelaySeconds"
        )
