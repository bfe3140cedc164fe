"""Schedule, preview and run-once request bodies: their shape and limits are defined here only.

The serializers validate strictly (exact types; unknown fields, nested ones included, are
rejected with their dotted path) and the functions at the bottom hand the services typed
values. Rules that need the database (the job type, its params schema, quotas) stay in
the services.
"""

import hashlib
import json
import re

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from effects.egress import url_refusal
from effects.messages import header_unsafe
from schedules import recurrence
from schedules.jitter import MAX_JITTER_SECONDS
from schedules.recurrence import MAX_HASH_KEY_LENGTH
from schedules.models import (
    CONCURRENCY_KEY,
    MAX_CONCURRENCY_KEY_LENGTH,
    MAX_EXPECTATION_SECONDS,
    MAX_EXPECTED_FAILURES,
    MAX_LABEL_KEY_LENGTH,
    MAX_LABEL_VALUE_LENGTH,
    MAX_LABELS,
    MAX_PAUSE_REASON_LENGTH,
    MisfirePolicy,
    OverlapPolicy,
)
from schedules.specs import ScheduleSpec
from kernel.errors import InvalidRequest
from scheduler_project.http.validation import (
    InstantField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
    validate_body,
)

MAX_NAME_LENGTH = 200
MAX_JOB_TYPE_LENGTH = 100
MAX_REVISION = 2**31 - 1
MAX_GRACE_SECONDS = 7 * 86400
MAX_ATTEMPTS = 100
MAX_DELAY_SECONDS = 86400
MAX_RECIPIENTS = 50
MAX_ADDRESS_LENGTH = 254
MAX_SUBJECT_LENGTH = 200
MAX_PREVIEW_COUNT = 100
MAX_START_DEADLINE_SECONDS = 86400
MAX_END_AFTER_OCCURRENCES = 1_000_000
# Window fields: request key -> ScheduleSpec field; null clears one (an edit) or leaves it open.
WINDOW_FIELDS = {"activeFrom": "active_from", "activeUntil": "active_until", "endAfterOccurrences": "end_after_occurrences"}
_EMAIL_ADDRESS = RegexValidator(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$", message="not an email address")
_HTTP_URL = RegexValidator(r"^https?://[^\s]{1,2000}$", message="must be an http(s) URL")


# Describes the recurrence object in the schema; `RecurrenceField` validates it.
class RecurrenceSerializer(serializers.Serializer):

    kind = serializers.ChoiceField(choices=["cron", "interval", "after_completion", "once", "rrule", "business_day"])
    cron = serializers.CharField(
        required=False, max_length=recurrence.MAX_CRON_LENGTH,
        help_text="kind=cron: 5 fields, or 6 with seconds first; L, W, #, ?, H and @ macros (docs/api.md)",
    )
    dialect = serializers.ChoiceField(
        choices=list(recurrence.DIALECTS), required=False,
        help_text="kind=cron: how the day fields combine; default vixie",
    )
    hashKey = serializers.CharField(
        required=False, read_only=True, help_text="kind=cron with H: the schedule's id, which fixes H's values",
    )
    timezone = serializers.CharField(required=False, help_text="IANA time-zone name; default UTC")
    everySeconds = serializers.IntegerField(required=False, min_value=1, help_text="kind=interval")
    anchor = serializers.DateTimeField(required=False, help_text="kind=interval; default: creation")
    delaySeconds = serializers.IntegerField(required=False, min_value=0, help_text="kind=after_completion")
    at = serializers.DateTimeField(required=False, help_text="kind=once: the single instant")
    rrule = serializers.CharField(
        required=False, max_length=recurrence.MAX_RRULE_LENGTH,
        help_text="kind=rrule: an RFC 5545 RRULE value, e.g. FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0",
    )
    dtstart = serializers.CharField(required=False, help_text="kind=rrule: local time without offset")
    exdates = serializers.ListField(child=serializers.CharField(), required=False, max_length=recurrence.MAX_DATES,
                                    help_text="kind=rrule: local times left out")
    rdates = serializers.ListField(child=serializers.CharField(), required=False, max_length=recurrence.MAX_DATES,
                                   help_text="kind=rrule: local times added")


@extend_schema_field(RecurrenceSerializer)
class RecurrenceField(serializers.Field):
    """The recurrence object as a Rule, checked by the recurrence grammar itself; its errors
    keep their codes (invalid_cron, invalid_timezone, invalid_recurrence). An interval without anchor stays
    unanchored until the service knows the creation time."""

    def to_internal_value(self, data):
        try:
            return recurrence.parse_rule(data, anchor_required=False)
        except recurrence.RecurrenceError as exc:
            detail = ErrorDetail(exc.message, code=exc.code)
            _, _, inner_field = exc.field.partition(".")
            raise serializers.ValidationError({inner_field: [detail]} if inner_field else [detail]) from None


@extend_schema_field({"type": "object", "nullable": True, "properties": {
    "calendarIds": {"type": "array", "items": {"type": "string"}, "maxItems": recurrence.MAX_CALENDARS},
    "policy": {"type": "string", "enum": ["skip", "shift_before", "shift_after"]}}})
class ScheduleCalendarField(serializers.Field):
    """The schedule's `calendar`: the tenant's calendars whose excluded dates the rule's
    instants skip or move around (null or no ids: none)."""

    def to_internal_value(self, data):
        from schedules.calendars import parse_schedule_calendar

        try:
            return parse_schedule_calendar(data)
        except InvalidRequest as exc:
            _, _, inner = exc.details.get("field", "").partition(".")
            raise serializers.ValidationError({inner: [exc.message]} if inner else [exc.message]) from None


class OneLineField(StrictCharField):
    """A header-safe line: CR, LF or NUL would let a value add mail headers of its own, and
    any control or format character (BEL, U+202E) makes the message unsendable."""

    default_error_messages = {
        "multiline": "must be one line without control or format characters (found U+{point:04X})",
    }

    def to_internal_value(self, data):
        unsafe = header_unsafe(data) if isinstance(data, str) else None
        if unsafe is not None:
            self.fail("multiline", point=ord(unsafe))
        return super().to_internal_value(data)


class NameField(OneLineField):
    """A schedule's name: the default subject of its mail, so one header-safe line."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not value.strip():
            self.fail("blank")
        return value


class WebhookUrlField(StrictCharField):
    """An http(s) URL whose host is public, unless the operator allowlisted it (effects.egress)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        refusal = url_refusal(value)
        if refusal:
            raise serializers.ValidationError(f"must name a public host: {refusal}")
        return value


class EmailAddressField(OneLineField):
    """A mailbox at a named domain. An address literal (`a@[127.0.0.1]`) or a numeric
    domain (`a@127.0.0.1`) would have the mail relay connect to an address of the tenant's
    choosing, past the mail exchangers a domain's owner publishes."""

    default_error_messages = {"not_a_domain": "must be an address at a domain name, not an IP address"}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        domain = value.rpartition("@")[2].rstrip(".")
        if "[" in domain or "]" in domain or domain.rpartition(".")[2].isdigit():
            self.fail("not_a_domain")
        return value


_LABEL_KEY = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._/-]{{0,{MAX_LABEL_KEY_LENGTH - 1}}}")


def label_refusal(key, value) -> tuple[str, str] | None:
    """(the field, why) when `key: value` cannot be a label; None when it can."""
    if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key):
        return "labels", (f"label key {str(key)[:80]!r} must be 1 to {MAX_LABEL_KEY_LENGTH} letters, digits or "
                          "._/- starting with a letter or digit")
    if not isinstance(value, str):
        return f"labels.{key}", "a label's value must be a string"
    if len(value) > MAX_LABEL_VALUE_LENGTH:
        return f"labels.{key}", f"a label's value has at most {MAX_LABEL_VALUE_LENGTH} characters"
    unsafe = header_unsafe(value)
    if unsafe is not None:
        return f"labels.{key}", f"must be one line without control or format characters (found U+{ord(unsafe):04X})"
    return None


@extend_schema_field({"type": "object", "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE_LENGTH},
                      "maxProperties": MAX_LABELS})
class LabelsField(serializers.Field):
    """At most MAX_LABELS string pairs; a key is a short name without ':' (the filter's
    separator), a value one line of at most MAX_LABEL_VALUE_LENGTH characters."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object of string pairs")
        if len(data) > MAX_LABELS:
            raise serializers.ValidationError(f"at most {MAX_LABELS} labels")
        for key, value in data.items():
            refusal = label_refusal(key, value)
            if refusal is not None:
                field, why = refusal
                raise serializers.ValidationError({key: [why]} if field != "labels" else [why])
        return dict(data)


def label_filter(values: list[str]) -> dict:
    """`?label=k:v` (repeatable: every one must match) as {k: v}, or a 400 on `label`."""
    if len(values) > MAX_LABELS:
        raise InvalidRequest(f"at most {MAX_LABELS} label filters", field="label")
    labels = {}
    for text in values:
        key, colon, value = text.partition(":")
        refusal = label_refusal(key, value) if colon else ("label", "must be key:value")
        if refusal is not None:
            raise InvalidRequest(f"label: {refusal[1]}", field="label")
        if labels.get(key, value) != value:
            raise InvalidRequest(f"label: {key!r} is given two values", field="label")
        labels[key] = value
    return labels


class RetrySerializer(StrictSerializer):
    maxAttempts = StrictIntegerField(required=False, min_value=1, max_value=MAX_ATTEMPTS)
    initialDelaySeconds = StrictFloatField(required=False, min_value=0, max_value=MAX_DELAY_SECONDS)
    maxDelaySeconds = StrictFloatField(
        required=False, min_value=0, max_value=MAX_DELAY_SECONDS, help_text="Not below initialDelaySeconds"
    )


class EmailEffectSerializer(StrictSerializer):
    to = serializers.ListField(
        child=EmailAddressField(max_length=MAX_ADDRESS_LENGTH, validators=[_EMAIL_ADDRESS]),
        min_length=1,
        max_length=MAX_RECIPIENTS,
    )
    subject = OneLineField(required=False, allow_blank=True, max_length=MAX_SUBJECT_LENGTH, help_text="One line")
    attach = StrictBooleanField(required=False, help_text="Attach the result file")


class WebhookEffectSerializer(StrictSerializer):
    url = WebhookUrlField(validators=[_HTTP_URL], help_text="http(s) URL of a public host")


class EffectsSerializer(StrictSerializer):
    email = EmailEffectSerializer(required=False, allow_null=True)
    webhook = WebhookEffectSerializer(required=False, allow_null=True)

    def validate(self, attrs):
        return {kind: dict(effect) for kind, effect in attrs.items() if effect is not None}


class AlertEmailSerializer(EmailEffectSerializer):
    attach = None  # an alert carries no result


class AlertTargetsSerializer(StrictSerializer):
    email = AlertEmailSerializer(required=False, allow_null=True)
    webhook = WebhookEffectSerializer(required=False, allow_null=True)

    def validate(self, attrs):
        return {kind: dict(target) for kind, target in attrs.items() if target is not None}


class ExpectationsSerializer(StrictSerializer):
    startWithinSeconds = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_EXPECTATION_SECONDS,
        help_text="An occurrence not started this long after its instant opens a late_start incident",
    )
    finishWithinSeconds = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_EXPECTATION_SECONDS,
        help_text="A run not finished this long after it started opens a long_running incident",
    )
    maxConsecutiveFailures = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_EXPECTED_FAILURES,
        help_text="This many runs failed in a row open a failures incident",
    )
    alert = AlertTargetsSerializer(required=False, allow_null=True,
                                   help_text="Who is told when an incident opens and resolves (effects rules)")

    def validate(self, attrs):
        given = {key: value for key, value in attrs.items() if value not in (None, {})}
        if not set(given) - {"alert"}:
            raise serializers.ValidationError(
                "name at least one of startWithinSeconds, finishWithinSeconds, maxConsecutiveFailures")
        return given


class ScheduleCreateSerializer(StrictSerializer):
    name = NameField(max_length=MAX_NAME_LENGTH)
    jobType = StrictCharField(
        max_length=MAX_JOB_TYPE_LENGTH, source="job_type", help_text="e.g. report.sales, demo.sleep"
    )
    params = serializers.DictField(required=False, help_text="Validated against the job type's schema.")
    recurrence = RecurrenceField()
    misfirePolicy = StrictChoiceField(choices=MisfirePolicy.values, required=False, source="misfire_policy")
    misfireGraceSeconds = StrictIntegerField(
        required=False, min_value=0, max_value=MAX_GRACE_SECONDS, source="misfire_grace_seconds"
    )
    overlapPolicy = StrictChoiceField(choices=OverlapPolicy.values, required=False, source="overlap_policy")
    retry = RetrySerializer(required=False, allow_null=True)
    effects = EffectsSerializer(required=False, allow_null=True)
    startDeadlineSeconds = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_START_DEADLINE_SECONDS,
        source="start_deadline_seconds",
        help_text="Strict start promise: admission refuses a wave that would start later at p99; null: ordinary",
    )
    jitterSeconds = StrictIntegerField(
        required=False, min_value=0, max_value=MAX_JITTER_SECONDS, source="jitter_seconds",
        help_text="Each occurrence is due a fixed offset in [0, jitterSeconds] after its instant",
    )
    concurrencyKey = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=MAX_CONCURRENCY_KEY_LENGTH,
        validators=[CONCURRENCY_KEY], source="concurrency_key",
        help_text="At most the key's limit (PUT /concurrency-keys/{key}; 1 unless set) of the tenant's "
                  "attempts with this key run at once; null or \"\": none",
    )
    activeFrom = InstantField(required=False, allow_null=True, source="active_from",
                              help_text="No occurrence before this instant; null: open")
    activeUntil = InstantField(required=False, allow_null=True, source="active_until",
                               help_text="No occurrence after this instant (after activeFrom); null: open")
    endAfterOccurrences = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_END_AFTER_OCCURRENCES,
        source="end_after_occurrences",
        help_text="The schedule ends once this many rule instants were materialized (manual runs not counted)",
    )
    labels = LabelsField(required=False, help_text=f"At most {MAX_LABELS} string pairs; an edit replaces them all")
    calendar = ScheduleCalendarField(required=False, allow_null=True,
                                     help_text="{calendarIds, policy: skip | shift_before | shift_after}; null: none")
    expectations = ExpectationsSerializer(required=False, allow_null=True,
                                          help_text="Schedule health: what opens an incident; null: none")

    def validate(self, attrs):
        if "calendar" in attrs and attrs["calendar"] is None:
            del attrs["calendar"]
            attrs["cleared"] = frozenset({"calendar"})
        rule = attrs.get("recurrence")
        if attrs.get("calendar") and rule is not None and rule.kind == "after_completion":
            raise serializers.ValidationError({"calendar": ["does not apply to an after_completion recurrence"]})
        if "effects" in attrs and attrs["effects"] is None:
            attrs["effects"] = {}  # null removes every effect
        if "expectations" in attrs:
            attrs["expectations"] = dict(attrs["expectations"] or {})  # null removes them
        if "start_deadline_seconds" in attrs and attrs["start_deadline_seconds"] is None:
            attrs["start_deadline_seconds"] = 0  # null removes the promise
        if "concurrency_key" in attrs and attrs["concurrency_key"] is None:
            attrs["concurrency_key"] = ""  # null removes the key
        cleared = frozenset(key for key, name in WINDOW_FIELDS.items() if name in attrs and attrs[name] is None)
        for key in cleared:
            del attrs[WINDOW_FIELDS[key]]
        if cleared:
            attrs["cleared"] = attrs.get("cleared", frozenset()) | cleared
        return attrs


class ScheduleUpdateSerializer(ScheduleCreateSerializer):
    """Any field of a create but jobType, and the revision the edit applies to."""

    name = NameField(max_length=MAX_NAME_LENGTH, required=False)
    jobType = None
    recurrence = RecurrenceField(required=False)
    retry = RetrySerializer(required=False)  # an edit changes retry keys; null is not one of them
    expectedRevision = StrictIntegerField(min_value=1, max_value=MAX_REVISION, source="expected_revision")
    dryRun = StrictBooleanField(required=False, source="dry_run",
                                help_text="true: answer what the edit would store (and its instantsDiff); store nothing")


class PauseSerializer(StrictSerializer):
    until = InstantField(required=False, allow_null=True, help_text="The pause ends by itself then; null: no end")
    reason = OneLineField(required=False, allow_blank=True, max_length=MAX_PAUSE_REASON_LENGTH)


class BulkFilterSerializer(StrictSerializer):
    labels = LabelsField(required=False, help_text="Every one must match")
    jobType = StrictCharField(required=False, max_length=MAX_JOB_TYPE_LENGTH, source="job_type")


class BulkPauseSerializer(StrictSerializer):
    filter = BulkFilterSerializer(help_text="At least one label or a jobType")
    until = InstantField(required=False, allow_null=True)
    reason = OneLineField(required=False, allow_blank=True, max_length=MAX_PAUSE_REASON_LENGTH)


class BulkResumeSerializer(StrictSerializer):
    actionId = StrictCharField(max_length=40, source="action_id")


class PreviewSerializer(StrictSerializer):
    recurrence = RecurrenceField(source="rule")
    count = StrictIntegerField(required=False, min_value=1, max_value=MAX_PREVIEW_COUNT)
    after = InstantField(required=False, allow_null=True, help_text="Exclusive; default now")
    activeFrom = InstantField(required=False, allow_null=True, source="active_from",
                              help_text="The schedule's window: no instant before it")
    activeUntil = InstantField(required=False, allow_null=True, source="active_until",
                               help_text="The schedule's window: no instant after it")
    hashKey = StrictCharField(
        required=False, min_length=1, max_length=MAX_HASH_KEY_LENGTH, source="hash_key",
        validators=[RegexValidator(r"^[ -~]+$", message="printable ASCII only")],
        help_text="Fixes the values of H in a cron rule, as a schedule's id does (preview H before creating)",
    )
    calendar = ScheduleCalendarField(required=False, allow_null=True,
                                     help_text="The schedule's calendar field: instants excluded, or moved")
    includeExcluded = StrictBooleanField(required=False, source="include_excluded",
                                         help_text="List excluded instants too, with the calendar excluding each")

    def validate(self, attrs):
        calendar = attrs.pop("calendar", None)
        if calendar:
            if attrs["rule"].kind == "after_completion":
                raise serializers.ValidationError({"calendar": ["does not apply to an after_completion recurrence"]})
            attrs["rule"] = attrs["rule"].calendared(calendar["calendarIds"], calendar["policy"])
        active_from, active_until = attrs.pop("active_from", None), attrs.pop("active_until", None)
        if active_from is not None and active_until is not None and active_until <= active_from:
            raise serializers.ValidationError({"activeUntil": ["must be after activeFrom"]})
        attrs["rule"] = attrs["rule"].within(active_from, active_until)
        return attrs


class RunOnceSerializer(StrictSerializer):
    params = serializers.DictField(required=False, help_text="Override of the schedule's params")
    runAt = InstantField(required=False, allow_null=True, source="run_at")


def schedule_spec(body: dict) -> ScheduleSpec:
    """The create request `body` as a ScheduleSpec, or InvalidRequest naming the first bad field."""
    return ScheduleSpec(**validate_body(ScheduleCreateSerializer, body))


def schedule_changes(body: dict) -> tuple[int, ScheduleSpec]:
    """(expectedRevision, the changed fields) of the edit request `body`."""
    return schedule_edit_request(body)[:2]


def schedule_edit_request(body: dict) -> tuple[int, ScheduleSpec, bool]:
    """(expectedRevision, the changed fields, dryRun) of the edit request `body`."""
    fields = dict(validate_body(ScheduleUpdateSerializer, body))
    dry_run = fields.pop("dry_run", False)
    return fields.pop("expected_revision"), ScheduleSpec(**fields), dry_run


def pause_arguments(body: dict) -> dict:
    """`schedule_pause`'s `until` and `reason`, those the request gives."""
    return dict(validate_body(PauseSerializer, body))


def bulk_pause_arguments(body: dict) -> dict:
    """`schedules_pause_matching`'s keyword arguments from the bulk pause request."""
    fields = dict(validate_body(BulkPauseSerializer, body))
    given = dict(fields.pop("filter"))
    return {"labels": given.get("labels") or {}, "job_type": given.get("job_type"), "until": fields.get("until"),
            "reason": fields.get("reason") or ""}


def preview_arguments(body: dict) -> dict:
    """`schedule_preview`'s keyword arguments (rule in the window given, after, count) from
    the preview request; a `hashKey` fixes the rule's `H` values."""
    arguments = dict(validate_body(PreviewSerializer, body))
    hash_key = arguments.pop("hash_key", None)
    if hash_key is not None:
        arguments["rule"] = arguments["rule"].keyed(hash_key)
    return arguments


def run_once_arguments(body: dict) -> dict:
    """`run_once`'s keyword arguments (params, run_at) from the run-once request."""
    return dict(validate_body(RunOnceSerializer, body))


def request_hash(body: dict) -> str:
    """Identifies a request body for its Idempotency-Key: a replay must carry the same body."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
