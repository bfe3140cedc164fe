"""Calendars (tenant token): excluded dates a tenant's schedules skip or move around."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from kernel.errors import InvalidRequest
from schedule_services.calendars import calendar_create, calendar_delete, calendar_import, calendar_update
from scheduler_project.http.cursors import decode_cursor, encode_cursor
from scheduler_project.http.json import json_object_body, read_body
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.views import TenantAPIView, query_cursor, query_limit
from schedules.calendars import (
    calendar_fields, calendar_get, calendar_representation, calendar_revisions, calendars_list,
)

TAGS = ["calendars"]
ID_PARAMETER = OpenApiParameter("calendar_id", str, OpenApiParameter.PATH)
_FIELDS_DOC = ("`name`, `timezone` (IANA; the zone whose local dates are excluded), `excludeDates` "
               "([\"2027-07-05\"], at most 10,000), `excludeAnnual` ([\"12-25\"]), `excludeWeekdays` "
               "(ISO, 1 = Monday)")


class CalendarCollectionView(TenantAPIView):
    query_parameters = {"get": frozenset({"limit", "cursor"})}

    @extend_schema(operation_id="calendars_list", summary="List calendars", tags=TAGS,
                   description="The caller's calendars, oldest id first, `limit` per page (1 to 200, default 50); pass "
                               "`nextCursor` back as `cursor` for the next page.",
                   responses={200: dict, **error_responses(400, 401, 403)})
    def get(self, request):
        limit = query_limit(request)
        scope = f"calendars:{request.tenant.id}"
        after_id = None
        if cursor := query_cursor(request):
            after_id = decode_cursor(scope, cursor).get("after")
            if not isinstance(after_id, str):
                raise InvalidRequest("invalid cursor", field="cursor")
        page = calendars_list(tenant=request.tenant, after_id=after_id, limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"after": page[-1].id})
        return Response({"results": [calendar_representation(c) for c in page], "nextCursor": next_cursor})

    @extend_schema(operation_id="calendars_create", summary="Create a calendar", tags=TAGS,
                   description=_FIELDS_DOC + ". Answers the calendar at revision 1.", request=dict,
                   responses={201: dict, **error_responses(400, 401, 403)})
    def post(self, request):
        fields = calendar_fields(json_object_body(request), partial=False)
        calendar = calendar_create(tenant=request.tenant, fields=fields)
        return Response(calendar_representation(calendar), status=201)


class CalendarDetailView(TenantAPIView):
    @extend_schema(operation_id="calendars_retrieve", summary="Get a calendar", tags=TAGS,
                   parameters=[ID_PARAMETER],
                   description="One calendar of the caller: its excluded dates, annual dates and weekdays, its "
                               "revision and how many schedules use it. Another tenant's calendar is 404.",
                   responses={200: dict, **error_responses(401, 403, 404)})
    def get(self, request, calendar_id):
        return Response(calendar_representation(calendar_get(tenant=request.tenant, calendar_id=calendar_id)))

    @extend_schema(operation_id="calendars_update", summary="Edit a calendar", tags=TAGS, parameters=[ID_PARAMETER],
                   description="The given fields (" + _FIELDS_DOC + ") replace the current ones; `expectedRevision` "
                               "is required (409 revision_conflict otherwise). The schedules using the calendar "
                               "get their nextRunAt again; occurrences already materialized stay as they are.",
                   request=dict, responses={200: dict, **error_responses(400, 401, 403, 404, 409)})
    def patch(self, request, calendar_id):
        body = json_object_body(request)
        expected = body.get("expectedRevision")
        if isinstance(expected, bool) or not isinstance(expected, int) or not 1 <= expected <= 2**31 - 1:
            raise InvalidRequest("expectedRevision is required: the revision this edit applies to",
                                 field="expectedRevision")
        fields = calendar_fields(body, partial=True)
        calendar = calendar_update(tenant=request.tenant, calendar_id=calendar_id, expected_revision=expected,
                                   fields=fields)
        return Response(calendar_representation(calendar))

    @extend_schema(operation_id="calendars_destroy", summary="Delete a calendar", tags=TAGS,
                   parameters=[ID_PARAMETER],
                   description="Removes the calendar for good; 409 invalid_state (with some of the schedules in "
                               "`details.scheduleIds`) while a live schedule uses it.",
                   request=None, responses={204: None, **error_responses(401, 403, 404, 409)})
    def delete(self, request, calendar_id):
        calendar_delete(tenant=request.tenant, calendar_id=calendar_id)
        return Response(status=204)


class CalendarRevisionsView(TenantAPIView):
    query_parameters = {"get": frozenset({"limit"})}

    @extend_schema(operation_id="calendars_revisions", summary="List a calendar's revisions", tags=TAGS,
                   parameters=[ID_PARAMETER],
                   description="Every create, edit and import of the calendar, newest first (`limit`, 1 to 200, "
                               "default 50): its fields as that revision set them, `authorKind` (api or admin) and "
                               "`createdAt`.",
                   responses={200: dict, **error_responses(400, 401, 403, 404)})
    def get(self, request, calendar_id):
        calendar = calendar_get(tenant=request.tenant, calendar_id=calendar_id)
        return Response({"results": calendar_revisions(calendar=calendar, limit=query_limit(request))})


class CalendarImportView(TenantAPIView):
    @extend_schema(operation_id="calendars_import", summary="Import an .ics file", tags=TAGS,
                   parameters=[ID_PARAMETER],
                   description="A `text/calendar` body (at most 1 MiB): the dates of its all-day VEVENTs are added "
                               "(RRULE'd events expanded for 10 years), as a new revision.",
                   request={"text/calendar": str}, responses={200: dict, **error_responses(400, 401, 403, 404)})
    def post(self, request, calendar_id):
        media_type = request.META.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()
        if media_type and media_type != "text/calendar":
            raise InvalidRequest("Content-Type must be text/calendar", field="Content-Type")
        calendar = calendar_import(tenant=request.tenant, calendar_id=calendar_id, text=read_body(request))
        return Response(calendar_representation(calendar))
