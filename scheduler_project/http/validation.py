"""Strict request validation: every request body is checked by a serializer built of these.

DRF's stock fields coerce ("42" -> 42, 1 -> True, 5 -> "5") and ignore unknown keys; the
contract wants exact types and unknown fields rejected, nested ones included.
"""

import re

from rest_framework import serializers

from schedules import recurrence
from kernel.clock import instant
from kernel.errors import InvalidCron, InvalidRecurrence, InvalidRequest, InvalidTimezone
from scheduler_project.http.errors import first_validation_error

# Opaque ids are short tokens; anything else can never name a row, so it is answered
# as "not found" without sending odd bytes (NUL, surrogates) to the database.
_ID_PATTERN = re.compile(r"[A-Za-z0-9_\-]{1,100}")
UNMATCHABLE_ID = "invalid-id"
_CHECKSUM_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
MAX_BIGINT = 2**63 - 1


def lookup_id(value: str) -> str:
    """`value` if it could be an id, else an id that matches nothing (so the service
    still applies the contract's precedence and answers 404 after validating the body)."""
    return value if _ID_PATTERN.fullmatch(value) else UNMATCHABLE_ID


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class InstantField(serializers.DateTimeField):
    """An instant as `recurrence.parse_instant` reads it (a UTC offset or Z, `T` between
    date and time, no space), as UTC, renderable on every zone's wall clock."""

    default_error_messages = {
        "invalid": "must be an ISO 8601 instant with a UTC offset or Z, e.g. 2026-09-23T13:00:00Z",
        "out_of_range": f"must be between {instant(recurrence.EARLIEST)} and {instant(recurrence.LATEST)}",
    }

    def to_internal_value(self, data):
        try:
            return recurrence.parse_instant(data)
        except recurrence.InstantOutOfRange:
            self.fail("out_of_range")
        except recurrence.NotAnInstant:
            self.fail("invalid")


class StrictCharField(serializers.CharField):
    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input=str(data)[:50])
        return super().to_internal_value(data)


class ChecksumField(StrictCharField):
    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not _CHECKSUM_PATTERN.fullmatch(value):
            raise serializers.ValidationError("must be sha256: followed by 64 lowercase hex digits")
        return value


# Rejects keys it does not declare; nested StrictSerializers do the same. (A comment, not a
# docstring: drf-spectacular would print a docstring on every request body in the schema.)
class StrictSerializer(serializers.Serializer):
    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({unknown[0]: ["unknown field"]})
        return super().to_internal_value(data)


# Error codes a field may give its ValidationError to leave the API as another contract code.
_ERRORS_BY_CODE = {"invalid_cron": InvalidCron, "invalid_timezone": InvalidTimezone,
                   "invalid_recurrence": InvalidRecurrence}


def validate_body(serializer_class, data: dict) -> dict:
    """Validated data, or the 400 error (invalid_request, or the code the field gave)
    naming the first offending field by its dotted path."""
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        field, message = first_validation_error(serializer.errors)
        error_class = _ERRORS_BY_CODE.get(getattr(message, "code", None), InvalidRequest)
        raise error_class(f"{field}: {message}" if field else message, field=field)
    return serializer.validated_data
