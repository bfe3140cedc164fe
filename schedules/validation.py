"""Validation of schedule request bodies: every problem names its dotted field."""

import re
from datetime import datetime, timezone

import jsonschema

from schedules import recurrence
from schedules.models import JobType, MisfirePolicy, OverlapPolicy
from scheduler_project.errors import InvalidCron, InvalidRequest, InvalidTimezone

MAX_NAME_LENGTH = 200
MAX_ATTEMPTS_LIMIT = 100
MAX_DELAY_LIMIT = 86400.0
MAX_GRACE_SECONDS = 7 * 86400
_EMAIL = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$")


def reject_unknown(obj: dict, allowed, prefix: str) -> None:
    for key in obj:
        if key not in allowed:
            raise InvalidRequest(f"unknown field {key!r}", field=f"{prefix}{key}")


def require_object(value, field: str) -> dict:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{field or 'body'} must be a JSON object", field=field or None)
    return value


def require_int(value, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{field} must be an integer", field=field)
    if not minimum <= value <= maximum:
        raise InvalidRequest(f"{field} must be between {minimum} and {maximum}", field=field)
    return value


def require_number(value, field: str, minimum: float, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidRequest(f"{field} must be a number", field=field)
    if not minimum <= value <= maximum:
        raise InvalidRequest(f"{field} must be between {minimum:g} and {maximum:g}", field=field)
    return float(value)


def require_choice(value, field: str, choices) -> str:
    if value not in list(choices):
        raise InvalidRequest(f"{field} must be one of {', '.join(choices)}", field=field)
    return value


def parse_instant(value, field: str) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise InvalidRequest(f"{field} must be an ISO 8601 instant", field=field)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidRequest(f"{field} must be an ISO 8601 instant", field=field) from None
    if parsed.utcoffset() is None:
        raise InvalidRequest(f"{field} must carry a UTC offset or Z", field=field)
    return parsed.astimezone(timezone.utc)


def parse_recurrence(value, *, default_anchor: datetime) -> recurrence.Rule:
    try:
        return recurrence.parse_rule(require_object(value, "recurrence"), default_anchor=default_anchor)
    except recurrence.InvalidCron as exc:
        raise InvalidCron(exc.message, field=exc.field) from None
    except recurrence.InvalidTimezone as exc:
        raise InvalidTimezone(exc.message, field=exc.field) from None
    except recurrence.RecurrenceError as exc:
        raise InvalidRequest(exc.message, field=exc.field) from None


def validate_params(job_type: JobType, params: dict) -> None:
    """Params against the job type's versioned schema."""
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


def parse_retry(value, job_type: JobType) -> dict:
    retry = {
        "maxAttempts": job_type.max_attempts,
        "initialDelaySeconds": job_type.initial_delay_seconds,
        "maxDelaySeconds": job_type.max_delay_seconds,
    }
    if value is None:
        return retry
    require_object(value, "retry")
    reject_unknown(value, retry.keys(), "retry.")
    if "maxAttempts" in value:
        retry["maxAttempts"] = require_int(value["maxAttempts"], "retry.maxAttempts", 1, MAX_ATTEMPTS_LIMIT)
    for key in ("initialDelaySeconds", "maxDelaySeconds"):
        if key in value:
            retry[key] = require_number(value[key], f"retry.{key}", 0, MAX_DELAY_LIMIT)
    if retry["maxDelaySeconds"] < retry["initialDelaySeconds"]:
        raise InvalidRequest("retry.maxDelaySeconds must not be below initialDelaySeconds", field="retry.maxDelaySeconds")
    return retry


def parse_effects(value) -> dict:
    if value is None:
        return {}
    require_object(value, "effects")
    reject_unknown(value, {"email", "webhook"}, "effects.")
    effects = {}
    if value.get("email") is not None:
        email = require_object(value["email"], "effects.email")
        reject_unknown(email, {"to", "subject", "attach"}, "effects.email.")
        to = email.get("to")
        if not isinstance(to, list) or not 1 <= len(to) <= 50:
            raise InvalidRequest("effects.email.to must be a list of 1 to 50 addresses", field="effects.email.to")
        for i, address in enumerate(to):
            if not isinstance(address, str) or len(address) > 254 or not _EMAIL.match(address):
                raise InvalidRequest("not an email address", field=f"effects.email.to.{i}")
        effects["email"] = {"to": to}
        if "subject" in email:
            if not isinstance(email["subject"], str) or len(email["subject"]) > 200 or "\n" in email["subject"]:
                raise InvalidRequest("subject must be one line of at most 200 characters", field="effects.email.subject")
            effects["email"]["subject"] = email["subject"]
        if "attach" in email:
            if not isinstance(email["attach"], bool):
                raise InvalidRequest("attach must be a boolean", field="effects.email.attach")
            effects["email"]["attach"] = email["attach"]
    if value.get("webhook") is not None:
        webhook = require_object(value["webhook"], "effects.webhook")
        reject_unknown(webhook, {"url"}, "effects.webhook.")
        url = webhook.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://[^\s]{1,2000}$", url):
            raise InvalidRequest("effects.webhook.url must be an http(s) URL", field="effects.webhook.url")
        effects["webhook"] = {"url": url}
    return effects


def parse_name(value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"name must be a non-empty string of at most {MAX_NAME_LENGTH} characters", field="name")
    return value


def parse_policies(body: dict, current: dict) -> dict:
    """misfirePolicy, misfireGraceSeconds, overlapPolicy over their current (or default) values."""
    out = dict(current)
    if "misfirePolicy" in body:
        out["misfirePolicy"] = require_choice(body["misfirePolicy"], "misfirePolicy", MisfirePolicy.values)
    if "misfireGraceSeconds" in body:
        out["misfireGraceSeconds"] = require_int(body["misfireGraceSeconds"], "misfireGraceSeconds", 0, MAX_GRACE_SECONDS)
    if "overlapPolicy" in body:
        out["overlapPolicy"] = require_choice(body["overlapPolicy"], "overlapPolicy", OverlapPolicy.values)
    return out
