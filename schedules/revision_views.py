"""Tenant API: what a schedule was (its revisions) and when its current rule fires next."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from schedules.selectors import schedule_get, schedule_get_for_history, schedule_revisions, schedule_rule
from schedules.services import schedule_preview
from scheduler_project.errors import InvalidRequest
from scheduler_project.http import api_docs, schemas
from scheduler_project.http.cursors import decode_cursor, encode_cursor
from scheduler_project.http.representations import preview_representation, revision_representation
from scheduler_project.http.schedule_requests import MAX_PREVIEW_COUNT
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import lookup_id
from scheduler_project.http.views import (
    PAGE_PARAMETERS,
    TenantAPIView,
    query_cursor,
    query_instant,
    query_integer,
    query_limit,
)

TAGS = ["schedules"]


class ScheduleRevisionsView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS}

    @extend_schema(
        operation_id="schedules_revisions_list",
        summary="List a schedule's revisions",
        description=(
            "Every revision of the schedule, newest first: the rule, parameters, policies and effects "
            "it set, when it was written and by whom (`authorKind`: `api` for a tenant request, "
            "`admin` for an operator). A run's `revision` names the one it executed. Paged by "
            "`limit` and `cursor`; readable after the schedule is deleted, like its runs."
        ),
        examples=api_docs.REVISIONS,
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER],
        responses={200: schemas.RevisionListSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule_id = lookup_id(schedule_id)
        limit = query_limit(request)
        scope = f"revisions:{schedule_id}"
        before = None
        if cursor := query_cursor(request):
            before = decode_cursor(scope, cursor).get("before")
            if isinstance(before, bool) or not isinstance(before, int):
                raise InvalidRequest("invalid cursor", field="cursor")
        schedule = schedule_get_for_history(tenant=request.tenant, schedule_id=schedule_id)
        page = schedule_revisions(schedule=schedule, before=before, limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"before": page[-1].revision})
        return Response({"results": [revision_representation(r) for r in page], "nextCursor": next_cursor})


class ScheduleInstantsView(TenantAPIView):
    query_parameters = {"get": frozenset({"count", "after"})}

    @extend_schema(
        operation_id="schedules_instants",
        summary="Preview a schedule's next instants",
        description=(
            "The next `count` instants (1 to 100, default 5) of the schedule's current rule strictly "
            "after `after` (default now), in UTC and on the rule's wall clock, resolved exactly like "
            "`POST /schedules/preview`. The rule is read as stored, paused or not; an "
            "`after_completion` rule answers one instant, its delay after `after`. Nothing changes."
        ),
        examples=api_docs.SCHEDULE_PREVIEW,
        tags=TAGS,
        parameters=[schemas.COUNT_PARAMETER, schemas.AFTER_PARAMETER],
        responses={200: schemas.PreviewResponseSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        count = query_integer(request, "count", default=None, minimum=1, maximum=MAX_PREVIEW_COUNT)
        given = {"count": count} if count is not None else {}  # else the service's default
        after = query_instant(request, "after")
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        rule = schedule_rule(schedule)
        instants = schedule_preview(rule=rule, after=after, **given) if rule is not None else []
        return Response(preview_representation(instants))
