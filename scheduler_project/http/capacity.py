"""Capacity endpoints: the forecast (operator token, or a tenant token for its own share),
a schedule's runtime statistics and its backfill (tenant token)."""

from datetime import timedelta

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from runs.authority import schedule_backfill
from runs.capacity.forecast import Forecast, ForecastTooLarge, forecast
from runs.capacity.statistics import job_type_statistics, schedule_durations, schedule_statistics
from schedules.selectors import schedule_get
from kernel.clock import authority_now, instant
from kernel.errors import InvalidRequest
from scheduler_project.http.auth import CapacityReaderAuthentication
from scheduler_project.http.json import json_object_body
from scheduler_project.http.representations import schedule_statistics_representation
from scheduler_project.http.schemas import ScheduleStatisticsSerializer, error_responses
from scheduler_project.http.validation import InstantField, StrictSerializer, lookup_id, validate_body
from scheduler_project.http.views import StrictAPIView, TenantAPIView, query_instant

MAX_FORECAST_RANGE = timedelta(days=7)
DEFAULT_FORECAST_RANGE = timedelta(hours=1)


def _round(seconds):
    return None if seconds is None or seconds == float("inf") else round(seconds, 3)


def forecast_representation(result: Forecast, *, operator: bool) -> dict:
    """The forecast answer; a tenant's leaves out the fleet's slots and their needs."""
    def row(r):
        p50, p99 = r.p(50), r.p(99)
        return {
            "minute": instant(r.minute), "resourceClass": r.resource_class, "due": r.due,
            "slotSeconds": round(r.slot_seconds, 3),
            "liveSlots": result.capacity.get(r.resource_class, {}).get("liveSlots", 0) if operator else None,
            "lateness": {"p50": _round(p50), "p99": _round(p99)},
            "feasible": p99 is not None and p99 <= result.objective,
            "slotsNeeded": r.slots_needed if operator else None,
        }

    classes = {rc: {**c, "requiredSlots": result.required.get(rc, c["busySlots"])}
               for rc, c in result.capacity.items()} if operator else None
    return {"from": instant(result.start), "to": instant(result.end), "scope": "installation" if operator else "tenant",
            "objectiveSeconds": result.objective, "classes": classes, "minutes": [row(r) for r in result.rows]}


def forecast_range(request) -> tuple:
    """[from, to): `from` (default now) down to its minute, `to` (default an hour later), at most 7 days."""
    start = query_instant(request, "from") or authority_now()
    start = start.replace(second=0, microsecond=0)
    end = query_instant(request, "to") or start + DEFAULT_FORECAST_RANGE
    if end <= start:
        raise InvalidRequest("to must be after from", field="to")
    if end - start > MAX_FORECAST_RANGE:
        raise InvalidRequest("the range may span at most 7 days", field="to")
    return start, end


class LatenessSerializer(serializers.Serializer):
    p50 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)


class ForecastMinuteSerializer(serializers.Serializer):
    minute = serializers.DateTimeField()
    resourceClass = serializers.CharField()
    due = serializers.IntegerField(help_text="Occurrences due in this minute (at their dueAt)")
    slotSeconds = serializers.FloatField()
    liveSlots = serializers.IntegerField(allow_null=True, help_text="null for a tenant")
    lateness = LatenessSerializer(help_text="Predicted start lateness, seconds; null without live slots")
    feasible = serializers.BooleanField()
    slotsNeeded = serializers.IntegerField(allow_null=True, help_text="Infeasible minutes; null for a tenant")


class ClassCapacitySerializer(serializers.Serializer):
    liveSlots = serializers.IntegerField()
    busySlots = serializers.IntegerField()
    freeSlots = serializers.IntegerField()
    processes = serializers.IntegerField()
    requiredSlots = serializers.IntegerField()


class ForecastSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["installation", "tenant"])
    objectiveSeconds = serializers.FloatField()
    classes = serializers.DictField(child=ClassCapacitySerializer(), allow_null=True)
    minutes = ForecastMinuteSerializer(many=True)


ForecastSerializer._declared_fields.update({"from": serializers.DateTimeField(), "to": serializers.DateTimeField()})


class BackfillResultSerializer(serializers.Serializer):
    instants = serializers.IntegerField()
    created = serializers.IntegerField()
    existing = serializers.IntegerField()


class CapacityForecastView(StrictAPIView):
    authentication_classes = [CapacityReaderAuthentication]
    query_parameters = {"get": frozenset({"from", "to", "resourceClass"})}

    @extend_schema(
        operation_id="capacity_forecast",
        summary="Forecast the waves of a range, minute by minute",
        description=(
            "Per minute of [from, to) (at most 7 days; `from` defaults to now, rounded down to its minute, "
            "`to` to an hour later) and resource class: the occurrences the schedules' rules make due, "
            "the slot-seconds they are expected to take, and the start lateness p50/p99 a queue "
            "simulation predicts against the live slots, in the order the claim serves them. An operator "
            "token sees the installation; a tenant token sees its own occurrences only (competing for the "
            "same slots) and no slot counts. A range whose occurrences are more than one forecast simulates "
            "(CAPACITY_FORECAST_BUDGET) is 400 on `to`: ask for a shorter one."
        ),
        tags=["capacity"],
        parameters=[OpenApiParameter("from", str), OpenApiParameter("to", str), OpenApiParameter("resourceClass", str)],
        responses={200: ForecastSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request):
        start, end = forecast_range(request)
        rc = request.query_params.get("resourceClass")
        if rc is not None and rc not in settings.RESOURCE_CLASSES:
            raise InvalidRequest(f"resourceClass must be one of {', '.join(settings.RESOURCE_CLASSES)}",
                                 field="resourceClass")
        tenant = request.tenant
        try:
            result = forecast(start, end, tenant_id=tenant.id if tenant else None, classes=[rc] if rc else None,
                              required=tenant is None)
        except ForecastTooLarge:
            raise InvalidRequest(
                "the schedules due in this range make more occurrences than one forecast simulates; "
                "ask for a shorter range", field="to", details={"budget": settings.CAPACITY_FORECAST_BUDGET}) from None
        return Response(forecast_representation(result, operator=tenant is None))


class BackfillSerializer(StrictSerializer):
    to = InstantField(source="end", help_text="Exclusive; must have passed")


BackfillSerializer._declared_fields["from"] = InstantField(source="start", help_text="Inclusive")


class ScheduleBackfillView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_backfill",
        summary="Backfill a past range",
        description=(
            "Creates the occurrences of the rule's instants in [from, to), a range that has passed: at most "
            "1,000 instants per request. An instant that already has its occurrence is left alone, so a "
            "repeated request creates nothing. They wait as `pending` (`pendingReason` backfill) and are "
            "released at most 100 per scan cycle, oldest first."
        ),
        tags=["schedules"],
        request=BackfillSerializer,
        responses={200: BackfillResultSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request, schedule_id):
        body = validate_body(BackfillSerializer, json_object_body(request))
        done = schedule_backfill(tenant=request.tenant, schedule_id=lookup_id(schedule_id), **body)
        return Response({"instants": done.instants, "created": done.created, "existing": done.existing})


class ScheduleStatisticsView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_statistics",
        summary="A schedule's runtime statistics",
        description=(
            "Duration (claim to accepted completion) and queue delay (due instant to that claim) percentiles "
            "of the schedule's own accepted attempts over the rolling window, and the duration the capacity "
            "forecast and admission expect of one of its runs: its own mean from `minSamples` samples on, "
            "else its job type's. Another tenant's schedule, or a deleted one, is 404 `not_found`."
        ),
        tags=["schedules"],
        responses={200: ScheduleStatisticsSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        stats = schedule_statistics(schedule.id)
        own = schedule_durations([schedule.id]).get(schedule.id)
        job_type = job_type_statistics(schedule.job_type_id) if own is None else None
        return Response(schedule_statistics_representation(schedule, stats, own, job_type))
