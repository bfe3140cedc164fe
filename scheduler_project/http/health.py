"""Schedule health endpoints (tenant token): a schedule's health, the tenant's incidents."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from runs.health.selectors import incidents_page, schedule_health
from schedules.selectors import schedule_get
from kernel.clock import instant
from kernel.errors import InvalidRequest
from scheduler_project.http import schemas
from scheduler_project.http.cursors import cursor_instant, decode_cursor, encode_cursor
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import lookup_id
from scheduler_project.http.views import PAGE_PARAMETERS, TenantAPIView, query_cursor, query_limit

TAGS = ["health"]
STATES = ("open", "resolved")


def incident_representation(incident) -> dict:
    return {
        "incidentId": incident.id,
        "scheduleId": incident.schedule_id,
        "kind": incident.kind,
        "runId": incident.run_id,
        "scheduledAt": instant(incident.instant),
        "openedAt": instant(incident.opened_at),
        "resolvedAt": instant(incident.resolved_at),
        "resolution": incident.resolution or None,
        "detail": incident.detail,
    }


class IncidentSerializer(serializers.Serializer):
    incidentId = serializers.CharField()
    scheduleId = serializers.CharField()
    kind = serializers.ChoiceField(choices=["late_start", "long_running", "failures", "forecast"])
    runId = serializers.CharField(allow_null=True, help_text="The occurrence concerned; null if never materialized")
    scheduledAt = serializers.DateTimeField(allow_null=True, help_text="That occurrence's instant")
    openedAt = serializers.DateTimeField()
    resolvedAt = serializers.DateTimeField(allow_null=True)
    resolution = serializers.CharField(
        allow_null=True, help_text="recovered, instant_passed, paused, expectation_removed, schedule_deleted")
    detail = serializers.DictField(help_text="The expectation breached and what was seen")


class HealthSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["healthy", "at_risk", "late", "failing"])
    since = serializers.DateTimeField()
    openIncidents = IncidentSerializer(many=True)


class IncidentListSerializer(serializers.Serializer):
    results = IncidentSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class ScheduleHealthView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_health",
        summary="A schedule's health",
        description=(
            "`state`: `failing` (a failures incident is open), `late` (late_start or long_running), "
            "`at_risk` (only a forecast incident), else `healthy`; `since`: when the oldest incident of "
            "that state opened (healthy: when the last incident resolved, or the schedule's creation). "
            "`openIncidents`: every open incident of the schedule, oldest first."
        ),
        tags=TAGS,
        responses={200: HealthSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        health = schedule_health(schedule)
        return Response({"state": health.state, "since": instant(health.since),
                         "openIncidents": [incident_representation(i) for i in health.open_incidents]})


class IncidentCollectionView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS | {"state", "scheduleId"}}

    @extend_schema(
        operation_id="incidents_list",
        summary="The tenant's incidents",
        description=(
            "Incidents of the caller's schedules (deleted ones included), newest opened first; "
            "`state=open` or `state=resolved` narrows them, `scheduleId` to one schedule. Paged by "
            "`limit` (1 to 200, default 50) and `cursor`."
        ),
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER, schemas.SCHEDULE_ID_PARAMETER,
                    OpenApiParameter("state", str, enum=list(STATES), required=False)],
        responses={200: IncidentListSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request):
        limit = query_limit(request)
        state = request.query_params.get("state")
        if state is not None and state not in STATES:
            raise InvalidRequest("state must be open or resolved", field="state")
        schedule_id = request.query_params.get("scheduleId")
        if schedule_id is not None:
            schedule_id = lookup_id(schedule_id)
        scope = f"incidents:{request.tenant.id}:{state}:{schedule_id}"
        before = None
        if cursor := query_cursor(request):
            given = decode_cursor(scope, cursor).get("before")
            if not isinstance(given, list) or len(given) != 2 or not isinstance(given[1], str):
                raise InvalidRequest("invalid cursor", field="cursor")
            before = (cursor_instant(given[0]), given[1])
        page = incidents_page(tenant=request.tenant, state=state, schedule_id=schedule_id, before=before,
                              limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"before": [page[-1].opened_at.isoformat(), page[-1].id]})
        return Response({"results": [incident_representation(i) for i in page], "nextCursor": next_cursor})
