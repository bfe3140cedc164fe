"""Client errors in a ``recurrence`` object; ``field`` is the dotted path at fault."""


class RecurrenceError(ValueError):
    """A client error in the ``recurrence`` object; ``field`` is the dotted path at fault."""

    code = "invalid_request"
    default_field = "recurrence"

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field or self.default_field


class InvalidCron(RecurrenceError):
    code = "invalid_cron"
    default_field = "recurrence.cron"


class InvalidTimezone(RecurrenceError):
    code = "invalid_timezone"
    default_field = "recurrence.timezone"


class InvalidRecurrence(RecurrenceError):
    code = "invalid_request"


class InvalidRRule(RecurrenceError):
    """An RRULE recurrence (its rule text, dtstart, exdates or rdates) that cannot be used."""

    code = "invalid_recurrence"
    default_field = "recurrence.rrule"
