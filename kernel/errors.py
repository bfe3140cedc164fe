"""Domain errors. Each carries the contract's HTTP status and stable machine-readable code."""


class DomainError(Exception):
    status = 400
    code = "invalid_request"

    def __init__(self, message: str = "", *, details: dict | None = None):
        super().__init__(message or self.code)
        self.message = message or self.code.replace("_", " ")
        self.details = details or {}


class InvalidRequest(DomainError):
    status, code = 400, "invalid_request"

    def __init__(self, message: str, *, field: str | None = None, details: dict | None = None):
        details = dict(details or {})
        if field:
            details["field"] = field
        super().__init__(message, details=details)


class ResultTooLarge(InvalidRequest):
    """A result past RESULT_MAX_BYTES (runs.authority.staging.check_result_size)."""


class InvalidCron(InvalidRequest):
    status, code = 400, "invalid_cron"


class InvalidTimezone(InvalidRequest):
    status, code = 400, "invalid_timezone"


class InvalidRecurrence(InvalidRequest):
    """An RRULE recurrence that cannot be used (its text, dtstart, exdates or rdates)."""

    status, code = 400, "invalid_recurrence"


class Unauthenticated(DomainError):
    status, code = 401, "unauthenticated"


class Forbidden(DomainError):
    status, code = 403, "forbidden"


class JobTypeForbidden(DomainError):
    status, code = 403, "job_type_forbidden"


class NotFound(DomainError):
    status, code = 404, "not_found"


class IdempotencyConflict(DomainError):
    status, code = 409, "idempotency_conflict"


class RevisionConflict(DomainError):
    status, code = 409, "revision_conflict"


class NotAnOccurrence(InvalidRequest):
    """An instant the schedule's rule does not produce (occurrence directives)."""

    status, code = 400, "not_an_occurrence"


class InvalidState(DomainError):
    status, code = 409, "invalid_state"


class JobTypeUnavailable(DomainError):
    """The schedule's job type has no declaration any more (disabled in the catalog): nothing
    new of it is accepted until its declaration is back."""

    status, code = 409, "job_type_unavailable"


class StaleFence(DomainError):
    """The caller's fence is no longer current: its result can never become canonical."""

    status, code = 409, "stale_fence"


class QuotaExceeded(DomainError):
    status, code = 429, "quota_exceeded"


class Contended(DomainError):
    """Nothing was done: the same request may be sent again in a moment (Retry-After)."""

    status, code = 503, "unavailable"


class DeadlineInfeasible(DomainError):
    """A strict schedule's start promise cannot be kept by the forecast capacity."""

    status, code = 409, "deadline_infeasible"
