"""Tenant API: schedules, preview, pause/resume, run once and run history."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from runs.authority import run_once, schedule_resume
from runs.selectors import history_watermark, runs_page
from schedules.selectors import schedule_get, schedule_get_for_history, schedules_list
from schedules.services import (
    schedule_create,
    schedule_delete,
    schedule_pause,
    schedule_preview,
    schedule_update,
)
from scheduler_project.errors import InvalidRequest
from scheduler_project.http import schemas
from scheduler_project.http.cursors import cursor_instant, decode_cursor, encode_cursor
from scheduler_project.http.json import json_object_body
from scheduler_project.clock import instant
from scheduler_project.http.representations import run_representation, schedule_representation
from scheduler_project.http.schedule_requests import (
    PreviewSerializer,
    RunOnceSerializer,
    ScheduleCreateSerializer,
    ScheduleUpdateSerializer,
    preview_arguments,
    request_hash,
    run_once_arguments,
    schedule_changes,
    schedule_spec,
)
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import lookup_id
from scheduler_project.http.views import (
    PAGE_PARAMETERS,
    TenantAPIView,
    idempotency_key,
    query_cursor,
    query_limit,
)

TAGS = ["schedules"]


def _created_status(created: bool) -> int:
    return status.HTTP_201_CREATED if created else status.HTTP_200_OK


class ScheduleCollectionView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS}

    @extend_schema(
        operation_id="schedules_list",
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER],
        responses={200: schemas.ScheduleListSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request):
        limit = query_limit(request)
        scope = f"schedules:{request.tenant.id}"
        after_id = None
        if cursor := query_cursor(request):
            after_id = decode_cursor(scope, cursor).get("after")
            if not isinstance(after_id, str):
                raise InvalidRequest("invalid cursor", field="cursor")
        page = schedules_list(tenant=request.tenant, after_id=after_id, limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"after": page[-1].id})
        return Response(
            {"results": [schedule_representation(s) for s in page], "nextCursor": next_cursor}
        )

    @extend_schema(
        operation_id="schedules_create",
        tags=TAGS,
        parameters=[schemas.IDEMPOTENCY_KEY_PARAMETER],
        request=ScheduleCreateSerializer,
        responses={
            201: schemas.ScheduleSerializer,
            200: OpenApiResponse(schemas.ScheduleSerializer, description="Idempotent replay"),
            **error_responses(400, 401, 403, 409, 429),
        },
    )
    def post(self, request):
        key = idempotency_key(request)
        body = json_object_body(request)
        schedule, created = schedule_create(
            tenant=request.tenant, spec=schedule_spec(body), idempotency_key=key, request_hash=request_hash(body)
        )
        return Response(schedule_representation(schedule), status=_created_status(created))


class SchedulePreviewView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_preview",
        tags=TAGS,
        request=PreviewSerializer,
        responses={200: schemas.PreviewResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request):
        instants = schedule_preview(**preview_arguments(json_object_body(request)))
        return Response({"instants": [{"at": instant(at), "local": local} for at, local in instants]})


class ScheduleDetailView(TenantAPIView):
    schema = schemas.RequiredPatchFieldsSchema()

    @extend_schema(
        operation_id="schedules_retrieve",
        tags=TAGS,
        responses={200: schemas.ScheduleSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        return Response(schedule_representation(schedule))

    @extend_schema(
        operation_id="schedules_update",
        tags=TAGS,
        request=ScheduleUpdateSerializer,
        responses={200: schemas.ScheduleSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def patch(self, request, schedule_id):
        expected_revision, changes = schedule_changes(json_object_body(request))
        schedule = schedule_update(
            tenant=request.tenant,
            schedule_id=lookup_id(schedule_id),
            expected_revision=expected_revision,
            changes=changes,
        )
        return Response(schedule_representation(schedule))

    @extend_schema(
        operation_id="schedules_destroy",
        tags=TAGS,
        responses={204: OpenApiResponse(description="Deleted"), **error_responses(401, 403, 404)},
    )
    def delete(self, request, schedule_id):
        schedule_delete(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SchedulePauseView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_pause",
        tags=TAGS,
        request=None,
        responses={200: schemas.ScheduleSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request, schedule_id):
        schedule = schedule_pause(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        return Response(schedule_representation(schedule))


class ScheduleResumeView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_resume",
        tags=TAGS,
        request=None,
        responses={200: schemas.ScheduleSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request, schedule_id):
        schedule = schedule_resume(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        return Response(schedule_representation(schedule))


class ScheduleRunsView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS}

    @extend_schema(
        operation_id="schedules_runs_list",
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER],
        responses={200: schemas.RunListSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule_id = lookup_id(schedule_id)
        limit = query_limit(request)
        scope = f"runs:{schedule_id}"
        after = None
        if cursor := query_cursor(request):
            payload = decode_cursor(scope, cursor)
            upper_bound = cursor_instant(payload.get("ub"))
            if not isinstance(payload.get("id"), str):
                raise InvalidRequest("invalid cursor", field="cursor")
            after = (cursor_instant(payload.get("at")), payload["id"])
        else:
            upper_bound = history_watermark()
        schedule = schedule_get_for_history(tenant=request.tenant, schedule_id=schedule_id)
        page = runs_page(schedule=schedule, upper_bound=upper_bound, after=after, limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            last = page[-1]
            next_cursor = encode_cursor(
                scope,
                {"ub": upper_bound.isoformat(), "at": last.scheduled_at.isoformat(), "id": last.id},
            )
        return Response(
            {
                "results": [run_representation(run) for run in page],
                "nextCursor": next_cursor,
                "watermark": instant(upper_bound),
            }
        )

    @extend_schema(
        operation_id="schedules_runs_create",
        tags=TAGS,
        parameters=[schemas.IDEMPOTENCY_KEY_PARAMETER],
        request=RunOnceSerializer,
        responses={
            201: schemas.RunSerializer,
            200: OpenApiResponse(schemas.RunSerializer, description="Idempotent replay"),
            **error_responses(400, 401, 403, 404, 409, 429),
        },
    )
    def post(self, request, schedule_id):
        key = idempotency_key(request)
        body = json_object_body(request, allow_empty=True)
        run, created = run_once(
            tenant=request.tenant,
            schedule_id=lookup_id(schedule_id),
            **run_once_arguments(body),
            idempotency_key=key,
            request_hash=request_hash(body),
        )
        return Response(run_representation(run), status=_created_status(created))
