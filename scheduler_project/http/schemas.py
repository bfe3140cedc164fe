"""OpenAPI descriptions of the contract's bodies (drf-spectacular components).

Response serializers here describe and never save anything; the worker-protocol request
serializers also validate, strictly. Schedule and run-once requests are in
`schedule_requests`.
"""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from schedules.models import AuthorKind, MisfirePolicy, OverlapPolicy, ResourceClass, UncertainEffectPolicy
from scheduler_project.http.schedule_requests import EffectsSerializer, ExpectationsSerializer
from scheduler_project.http.validation import (
    MAX_BIGINT,
    ChecksumField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictSerializer,
)

RUN_STATES = ["pending", "queued", "running", "succeeded", "failed", "canceled", "skipped"]
ATTEMPT_STATES = ["running", "succeeded", "failed", "expired", "canceled"]
EFFECT_STATES = ["pending", "sent", "uncertain", "failed", "skipped"]


# --- Errors ------------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. revision_conflict.")
    message = serializers.CharField()
    details = serializers.DictField(
        help_text="field: dotted path of the offending field; current: the current schedule "
        "(revision_conflict)."
    )


class ErrorBodySerializer(serializers.Serializer):
    error = ErrorDetailSerializer()

    class Meta:
        ref_name = "ErrorBody"


def error_responses(*statuses: int) -> dict:
    """The error answers of an operation; every authenticated one (401) may also be rate-limited (429)."""
    descriptions = {
        400: "invalid_request, invalid_cron, invalid_timezone or invalid_recurrence",
        401: "unauthenticated: missing or bad token",
        403: "forbidden (wrong kind of token) or job_type_forbidden",
        404: "not_found",
        405: "method_not_allowed",
        409: "idempotency_conflict, revision_conflict, invalid_state, stale_fence, deadline_infeasible or "
             "job_type_unavailable",
        429: "rate_limited (Retry-After says when to retry) or quota_exceeded",
    }
    if 401 in statuses and 429 not in statuses:
        statuses = (*statuses, 429)
    return {status: OpenApiResponse(ErrorBodySerializer, description=descriptions[status]) for status in statuses}


# --- Schedules ---------------------------------------------------------------------------


class ScheduleRetrySerializer(serializers.Serializer):
    maxAttempts = serializers.IntegerField()
    initialDelaySeconds = serializers.FloatField()
    maxDelaySeconds = serializers.FloatField()


# What one revision of a schedule sets. (A comment: drf-spectacular would show a docstring on
# every subclass's component.)
class RevisedFieldsSerializer(serializers.Serializer):
    name = serializers.CharField()
    params = serializers.DictField()
    recurrence = serializers.DictField()
    misfirePolicy = serializers.ChoiceField(choices=MisfirePolicy.values)
    misfireGraceSeconds = serializers.IntegerField()
    overlapPolicy = serializers.ChoiceField(choices=OverlapPolicy.values)
    retry = ScheduleRetrySerializer()
    effects = EffectsSerializer()
    startDeadlineSeconds = serializers.IntegerField(allow_null=True, help_text="Strict start promise; null: ordinary")
    jitterSeconds = serializers.IntegerField(help_text="Occurrences are due up to this many seconds late; 0: none")
    concurrencyKey = serializers.CharField(
        allow_null=True, help_text="Attempts of the tenant's schedules with this key run at most the key's limit at once")
    activeFrom = serializers.DateTimeField(allow_null=True, help_text="No occurrence before it; null: open")
    activeUntil = serializers.DateTimeField(allow_null=True, help_text="No occurrence after it; null: open")
    endAfterOccurrences = serializers.IntegerField(
        allow_null=True, help_text="Ends once this many rule instants were materialized; null: no end by count")
    labels = serializers.DictField(child=serializers.CharField(), help_text="At most 20 string pairs")
    calendar = serializers.DictField(allow_null=True, help_text="{calendarIds, policy}: the calendars whose excluded "
                                                                "dates the rule's instants skip or move around")
    expectations = ExpectationsSerializer(allow_null=True, help_text="Schedule health; null: none")


class RuleWarningSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="ambiguous_day_fields: both cron day fields are restricted")
    message = serializers.CharField()
    alternatives = serializers.DictField(
        child=serializers.ListField(child=serializers.DateTimeField()),
        help_text="Each dialect (vixie, and, or): the rule's next 5 instants under it",
    )


class ScheduleSerializer(RevisedFieldsSerializer):
    scheduleId = serializers.CharField()
    jobType = serializers.CharField()
    jobTypeAvailable = serializers.BooleanField(
        help_text="false: the job type has no declaration any more; the schedule's runs wait (pendingReason "
                  "job_type_unavailable) and run once and backfill are 409 job_type_unavailable")
    revision = serializers.IntegerField()
    paused = serializers.BooleanField()
    pausedUntil = serializers.DateTimeField(allow_null=True, help_text="A timed pause ends by itself then")
    pauseReason = serializers.CharField(allow_null=True)
    pauseActionId = serializers.CharField(allow_null=True, help_text="The bulk pause whose pause this is")
    nextRunAt = serializers.DateTimeField(allow_null=True)
    nextRunAtLocal = serializers.CharField(allow_null=True)
    occurrencesMaterialized = serializers.IntegerField(
        help_text="Rule instants materialized so far (any outcome; manual and backfilled runs not counted)")
    ended = serializers.BooleanField(
        help_text="Past its end: endAfterOccurrences materialized, activeUntil passed, or no instant left in "
                  "its rule; nextRunAt is null")
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    warnings = RuleWarningSerializer(many=True, required=False,
                                     help_text="Create, edit and GET answers: about the rule, e.g. ambiguous_day_fields")


class ScheduleListSerializer(serializers.Serializer):
    results = ScheduleSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class BulkPauseResponseSerializer(serializers.Serializer):
    actionId = serializers.CharField()
    paused = serializers.IntegerField(help_text="The schedules this action paused (not those paused before)")


class BulkResumeResponseSerializer(serializers.Serializer):
    actionId = serializers.CharField()
    resumed = serializers.IntegerField(help_text="The schedules this request resumed")


class AuditEntrySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(help_text="The token's name, the staff user's username, or scheduler")
    actorKind = serializers.ChoiceField(choices=AuthorKind.values)
    action = serializers.ChoiceField(choices=["create", "update", "pause", "resume", "delete"])
    scheduleId = serializers.CharField()
    revision = serializers.IntegerField(required=False, help_text="create and update: the revision written")
    until = serializers.DateTimeField(required=False, help_text="pause: when it ends by itself")
    reason = serializers.CharField(required=False)
    actionId = serializers.CharField(required=False, help_text="the bulk action of the pause or resume")
    timed = serializers.BooleanField(required=False, help_text="resume: the end of a timed pause")


class AuditListSerializer(serializers.Serializer):
    results = AuditEntrySerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class RevisionSerializer(RevisedFieldsSerializer):
    revision = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    authorKind = serializers.ChoiceField(choices=AuthorKind.values, help_text="api: a tenant request; admin: an operator")
    instantsDiff = serializers.JSONField(allow_null=True, help_text="The edit's added and removed instants over the "
                                                                    "next 30 days; null for revision 1")


class RevisionListSerializer(serializers.Serializer):
    results = RevisionSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class PreviewInstantSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    local = serializers.CharField()
    shiftedFrom = serializers.DateTimeField(required=False, help_text="A calendar moved the instant from this one")
    excluded = serializers.CharField(required=False, help_text="includeExcluded: the calendar excluding it")


class PreviewResponseSerializer(serializers.Serializer):
    instants = PreviewInstantSerializer(many=True)
    warnings = RuleWarningSerializer(many=True)


class ScheduleInstantSerializer(PreviewInstantSerializer):
    dueAt = serializers.DateTimeField(help_text="`at` plus the schedule's jitter offset for it")


class ScheduleInstantsSerializer(serializers.Serializer):
    instants = ScheduleInstantSerializer(many=True)


class PercentilesSerializer(serializers.Serializer):
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)


class RuntimeStatisticsSerializer(serializers.Serializer):
    windowSeconds = serializers.IntegerField()
    samples = serializers.IntegerField(help_text="Accepted attempts in the window (at most 1000, the latest)")
    durationSeconds = PercentilesSerializer(help_text="Claim to accepted completion; null without samples")
    queueDelaySeconds = PercentilesSerializer(
        help_text="Due to claim of the accepted attempt (requested work: from its creation if later)")
    expectedDurationSeconds = serializers.FloatField(
        help_text="What the forecast uses: the mean over every tenant's runs, or the default")


class ScheduleStatisticsSerializer(RuntimeStatisticsSerializer):
    scheduleId = serializers.CharField()
    jobType = serializers.CharField()
    samples = serializers.IntegerField(help_text="The schedule's accepted attempts in the window (at most 1000, the latest)")
    minSamples = serializers.IntegerField(help_text="Samples from which forecasts use the schedule's own mean")
    expectedDurationSeconds = serializers.FloatField(
        help_text="What the forecast uses for this schedule: its own mean (two significant digits) from minSamples "
                  "samples on, else its job type's expectedDurationSeconds")
    expectedDurationSource = serializers.ChoiceField(choices=["schedule", "jobType"])


class JobTypeSerializer(serializers.Serializer):
    name = serializers.CharField()
    resourceClass = serializers.ChoiceField(choices=ResourceClass.values)
    paramsSchema = serializers.DictField(help_text="JSON Schema (draft 2020-12) that `params` must match")
    paramsSchemaVersion = serializers.IntegerField()
    leaseSeconds = serializers.IntegerField(help_text="Default lease of a claim")
    timeoutSeconds = serializers.IntegerField()
    retry = ScheduleRetrySerializer(help_text="Default retry policy of a new schedule")
    uncertainEffectPolicy = serializers.ChoiceField(choices=UncertainEffectPolicy.values)
    statistics = RuntimeStatisticsSerializer()


class JobTypeListSerializer(serializers.Serializer):
    results = JobTypeSerializer(many=True)


# --- Runs --------------------------------------------------------------------------------


class AttemptReplaySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_blank=True, help_text="The name of the token that asked")
    note = serializers.CharField(allow_blank=True)


class RunReplaySerializer(AttemptReplaySerializer):
    afterAttempt = serializers.IntegerField(help_text="The attempts the run had when it was replayed")


class AttemptSerializer(serializers.Serializer):
    attemptId = serializers.CharField()
    number = serializers.IntegerField()
    state = serializers.ChoiceField(choices=ATTEMPT_STATES)
    startedAt = serializers.DateTimeField()
    finishedAt = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    reason = serializers.ChoiceField(choices=["timeout"], allow_null=True,
                                     help_text="timeout: the attempt failed because it ran past its job type's timeout")
    replay = AttemptReplaySerializer(allow_null=True, help_text="The replay this attempt is the first of, else null")


class RunResultSerializer(serializers.Serializer):
    checksum = serializers.CharField()
    size = serializers.IntegerField(allow_null=True)
    contentType = serializers.CharField(allow_null=True)


class RunProgressSerializer(serializers.Serializer):
    fraction = serializers.FloatField(min_value=0, max_value=1)
    message = serializers.CharField(allow_blank=True)
    updatedAt = serializers.DateTimeField()


class EffectSerializer(serializers.Serializer):
    action = serializers.CharField()
    kind = serializers.CharField()
    state = serializers.ChoiceField(choices=EFFECT_STATES)
    reason = serializers.CharField(
        allow_null=True, help_text="Why a failed effect was refused without a request: egress_denied, quota_exceeded"
    )


class RunSerializer(serializers.Serializer):
    runId = serializers.CharField()
    scheduleId = serializers.CharField()
    revision = serializers.IntegerField()
    trigger = serializers.ChoiceField(choices=["schedule", "manual"])
    backfilled = serializers.BooleanField(help_text="An occurrence created by a backfill request (trigger schedule)")
    jobType = serializers.CharField()
    state = serializers.ChoiceField(choices=RUN_STATES)
    pendingReason = serializers.CharField(
        allow_null=True, help_text="Why a waiting run is not claimed yet: not_due, overlap, retry, backfill, or "
                                   "job_type_unavailable (its job type has no declaration any more)")
    attempt = serializers.IntegerField()
    maxAttempts = serializers.IntegerField()
    scheduledAt = serializers.DateTimeField()
    dueAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    skipReason = serializers.CharField(allow_null=True, help_text="misfire, overlap, calendar or directive")
    shiftedFrom = serializers.DateTimeField(allow_null=True, help_text="The instant a calendar moved this one from")
    note = serializers.CharField(allow_null=True, help_text="The note of the instant's directive (occurrence directives)")
    skippedCount = serializers.IntegerField(allow_null=True)
    skippedThrough = serializers.DateTimeField(allow_null=True)
    cancellationRequested = serializers.BooleanField()
    cancellationAccepted = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)
    attempts = AttemptSerializer(many=True)
    result = RunResultSerializer(allow_null=True)
    progress = RunProgressSerializer(
        allow_null=True, help_text="The job's last ctx.progress() of the latest attempt (null when it reported none)"
    )
    effects = EffectSerializer(many=True)
    replays = RunReplaySerializer(many=True, help_text="Each replay of the run once failed, oldest first")
    createdAt = serializers.DateTimeField()


class RunListSerializer(serializers.Serializer):
    results = RunSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)
    watermark = serializers.DateTimeField()


class ResultUrlSerializer(serializers.Serializer):
    url = serializers.URLField()
    expiresAt = serializers.DateTimeField()
    checksum = serializers.CharField()


# --- Worker protocol (these validate) ------------------------------------------------------


class ClaimSerializer(StrictSerializer):
    workerId = StrictCharField(required=False, max_length=200, allow_blank=True)
    resourceClasses = serializers.ListField(
        child=StrictChoiceField(choices=ResourceClass.values), required=False, allow_null=True, max_length=10
    )
    leaseSeconds = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=3600)


class ClaimResponseSerializer(serializers.Serializer):
    runId = serializers.CharField()
    attemptId = serializers.CharField()
    fence = serializers.IntegerField()
    leaseExpiresAt = serializers.DateTimeField()
    leaseSeconds = serializers.IntegerField()
    jobType = serializers.CharField()
    params = serializers.DictField()
    revision = serializers.IntegerField()
    scheduleId = serializers.CharField()
    attempt = serializers.IntegerField()


class HeartbeatSerializer(StrictSerializer):
    runId = StrictCharField(max_length=100)
    attemptId = StrictCharField(max_length=100)
    fence = StrictIntegerField(min_value=0, max_value=MAX_BIGINT)


class HeartbeatResponseSerializer(serializers.Serializer):
    leaseExpiresAt = serializers.DateTimeField()
    cancellationRequested = serializers.BooleanField()


class ObjectRefSerializer(StrictSerializer):
    key = StrictCharField(max_length=500)
    versionId = StrictCharField(max_length=200, allow_null=True, required=False)


class CompleteSerializer(HeartbeatSerializer):
    outcome = StrictChoiceField(choices=["succeeded", "failed", "canceled"])
    object = ObjectRefSerializer(required=False, allow_null=True)
    checksum = ChecksumField(required=False, allow_null=True)
    error = StrictCharField(required=False, allow_blank=True, max_length=10000)
    retryable = StrictBooleanField(required=False)
    reason = StrictChoiceField(choices=["timeout"], required=False)

    def validate(self, attrs):
        outcome = attrs["outcome"]
        if outcome == "succeeded":
            if not attrs.get("object"):
                raise serializers.ValidationError({"object": ["required when outcome is succeeded"]})
            if not attrs.get("checksum"):
                raise serializers.ValidationError({"checksum": ["required when outcome is succeeded"]})
        else:
            for name in ("object", "checksum"):
                if attrs.get(name) is not None:
                    raise serializers.ValidationError({name: ["only allowed when outcome is succeeded"]})
            for name in ("retryable", "reason"):
                if outcome != "failed" and name in attrs:
                    raise serializers.ValidationError({name: ["only allowed when outcome is failed"]})
        if outcome == "succeeded" and "reason" in attrs:
            raise serializers.ValidationError({"reason": ["only allowed when outcome is failed"]})
        return attrs


class UploadResponseSerializer(serializers.Serializer):
    object = ObjectRefSerializer()
    checksum = serializers.CharField()


class RequiredPatchFieldsSchema(AutoSchema):
    """Describes PATCH bodies with their required fields (expectedRevision) instead of
    drf-spectacular's all-optional "Patched" variant."""

    def _get_request_for_media_type(self, serializer, direction="request"):
        method = self.method
        if method == "PATCH":
            self.method = "POST"
        try:
            return super()._get_request_for_media_type(serializer, direction)
        finally:
            self.method = method


# --- Parameters --------------------------------------------------------------------------

LIMIT_PARAMETER = OpenApiParameter("limit", int, description="1 to 200 (default 50)")
CURSOR_PARAMETER = OpenApiParameter("cursor", str, description="Opaque cursor from nextCursor")
LABEL_PARAMETER = OpenApiParameter(
    "label", str, many=True, description="`key:value`; repeatable, every one must match (at most 20)"
)
SCHEDULE_ID_PARAMETER = OpenApiParameter("scheduleId", str, description="Only this schedule's entries")
SINCE_PARAMETER = OpenApiParameter("since", OpenApiTypes.DATETIME, description="Only entries at or after this instant")
IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, description="1 to 255 printable ASCII characters"
)
RUN_FILTER_PARAMETERS = [
    OpenApiParameter(
        "state", str, description="A run state, or several comma-separated (`failed,canceled`): " + ", ".join(RUN_STATES)
    ),
    OpenApiParameter("scheduleId", str, description="Only this schedule's runs (deleted schedules too)"),
    OpenApiParameter("jobType", str, description="Only runs of this job type"),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Only runs with scheduledAt at or after this instant"),
]
COUNT_PARAMETER = OpenApiParameter("count", int, description="1 to 100 (default 5)")
AFTER_PARAMETER = OpenApiParameter("after", OpenApiTypes.DATETIME, description="Exclusive; default now")
FENCE_PARAMETER = OpenApiParameter("fence", int, required=True, description="The attempt's fence")
FILENAME_PARAMETER = OpenApiParameter(
    "filename", str, description="The name downloads of the result carry: no path, quote or control character, 1 to 200 characters"
)
