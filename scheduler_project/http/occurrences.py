"""Occurrence directives (tenant token): a schedule's coming instants, and skip, hold or a
note on one of them (schedule_services.directives)."""

from datetime import timedelta

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from kernel.clock import authority_now, instant
from kernel.errors import InvalidRequest
from schedule_services.directives import (
    HORIZON, MAX_OCCURRENCES, directive_delete, directive_put, occurrences_between, orphaned_directives,
    orphaned_occurrences,
)
from scheduler_project.http.cursors import cursor_instant, decode_cursor, encode_cursor
from scheduler_project.http.json import json_object_body
from scheduler_project.http.representations import schedule_detail_representation
from scheduler_project.http.schedule_requests import OneLineField
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import StrictChoiceField, StrictSerializer, lookup_id, validate_body
from scheduler_project.http.views import TenantAPIView, query_cursor, query_instant, query_integer, request_actor
from schedules import recurrence
from schedules.models import DirectiveAction, MAX_DIRECTIVE_NOTE_LENGTH
from schedules.selectors import schedule_get

TAGS = ["occurrences"]
DEFAULT_SPAN = timedelta(days=30)
INSTANT_PARAMETER = OpenApiParameter("at", str, OpenApiParameter.PATH,
                                     description="A rule instant, ISO 8601 with Z or an offset")


class DirectiveSerializer(StrictSerializer):
    action = StrictChoiceField(choices=DirectiveAction.values)
    note = OneLineField(required=False, allow_blank=True, max_length=MAX_DIRECTIVE_NOTE_LENGTH)


def directive_representation(directive) -> dict | None:
    if directive is None:
        return None
    return {"action": directive.action, "note": directive.note, "createdAt": instant(directive.created_at),
            "createdBy": directive.actor}


def occurrence_representation(occurrence) -> dict:
    body = {"at": instant(occurrence.at), "local": occurrence.local,
            "directive": directive_representation(occurrence.directive)}
    if occurrence.directive is not None and occurrence.directive.orphaned_at is not None:
        body["orphanedAt"] = instant(occurrence.directive.orphaned_at)
    else:
        body["runId"], body["state"] = occurrence.run_id, occurrence.state
    return body


def edit_representation(edit) -> dict:
    """A PATCH's answer: the schedule as stored (or, a dry run, as it would be), the edit's
    instantsDiff and the directives it orphaned."""
    body = schedule_detail_representation(edit.schedule)
    body["instantsDiff"] = edit.instants_diff
    body["orphanedDirectives"] = [occurrence_representation(o) for o in orphaned_occurrences(edit.schedule, edit.orphaned)]
    if not edit.stored:
        body["dryRun"] = True
    return body


def path_instant(raw: str):
    try:
        return recurrence.parse_instant(raw)
    except recurrence.InstantOutOfRange:
        raise InvalidRequest(f"instant must be between {instant(recurrence.EARLIEST)} and "
                             f"{instant(recurrence.LATEST)}", field="instant") from None
    except recurrence.NotAnInstant:
        raise InvalidRequest("instant must be an ISO 8601 instant with a UTC offset or Z", field="instant") from None


class ScheduleOccurrencesView(TenantAPIView):
    query_parameters = {"get": frozenset({"from", "to", "cursor", "limit", "orphaned"})}

    @extend_schema(
        operation_id="schedules_occurrences_list",
        summary="List a schedule's coming occurrences with their directives",
        description=(
            "The rule's instants in `[from, to]` (default now and 30 days later; at most 366 days apart), "
            "`limit` per page (default 100, at most 1,000), each with its `directive` (null: none) and, once "
            "materialized, its `runId` and `state`. With `endAfterOccurrences`, instants past the last one the "
            "schedule has left are not listed (those left count from its next run on). `?orphaned=true` lists instead the directives an edit left "
            "without an instant of the rule (`orphanedAt`)."
        ),
        tags=TAGS,
        parameters=[OpenApiParameter("from", str), OpenApiParameter("to", str), OpenApiParameter("limit", int),
                    OpenApiParameter("cursor", str), OpenApiParameter("orphaned", bool)],
        responses={200: OpenApiResponse(description="results and nextCursor"), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        orphaned = request.query_params.get("orphaned")
        if orphaned not in (None, "true", "false"):
            raise InvalidRequest("orphaned must be true or false", field="orphaned")
        if orphaned == "true":
            return Response({"results": [occurrence_representation(o) for o in orphaned_directives(schedule)],
                             "nextCursor": None})
        limit = query_integer(request, "limit", default=100, minimum=1, maximum=MAX_OCCURRENCES)
        given_start, given_end = query_instant(request, "from"), query_instant(request, "to")
        start = given_start or authority_now()
        end = given_end or start + DEFAULT_SPAN
        if end < start:
            raise InvalidRequest("to must not be before from", field="to")
        if end - start > HORIZON:
            raise InvalidRequest(f"from and to may be at most {HORIZON.days} days apart", field="to")
        scope = f"occurrences:{schedule.id}:{instant(given_start)}:{instant(given_end)}"
        if cursor := query_cursor(request):
            # The page after the cursor's instant, within the first page's range.
            page_of = decode_cursor(scope, cursor)
            start = cursor_instant(page_of.get("after")) + timedelta(microseconds=1)
            end = given_end or cursor_instant(page_of.get("end"))
        page = occurrences_between(schedule, start, end, limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"after": page[-1].at.isoformat(), "end": end.isoformat()})
        return Response({"results": [occurrence_representation(o) for o in page], "nextCursor": next_cursor})


class ScheduleOccurrenceView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_occurrences_update",
        summary="Skip, hold or annotate one coming occurrence",
        description=(
            "`skip`: the run is recorded `skipped` with `skipReason: directive`; `hold`: it is created `pending` "
            "with `pendingReason: held` and starts only after `POST /runs/{runId}/release` (or is canceled); "
            "`note`: the run carries `note` (every action copies it). Replaces a directive at the instant. The "
            "instant must be one the rule produces (400 `not_an_occurrence`), at most 366 days ahead, and not yet "
            "materialized (409 `invalid_state`). At most 1,000 directives per schedule (429 `quota_exceeded`)."
        ),
        tags=TAGS, parameters=[INSTANT_PARAMETER], request=DirectiveSerializer,
        responses={200: OpenApiResponse(description="The occurrence with its directive"),
                   **error_responses(400, 401, 403, 404, 409, 429)},
    )
    def put(self, request, schedule_id, at):
        schedule_id, at = lookup_id(schedule_id), path_instant(at)
        body = validate_body(DirectiveSerializer, json_object_body(request))
        directive = directive_put(tenant=request.tenant, schedule_id=schedule_id, at=at, action=body["action"],
                                  note=body.get("note", ""), actor=request_actor(request))
        schedule = schedule_get(tenant=request.tenant, schedule_id=schedule_id)
        [occurrence] = occurrences_between(schedule, at, at, 1) or [None]
        local = occurrence.local if occurrence is not None else None
        return Response({"at": instant(at), "local": local, "directive": directive_representation(directive)})

    @extend_schema(
        operation_id="schedules_occurrences_destroy",
        summary="Remove an occurrence's directive",
        description="204. 404 without a directive at the instant; 409 `invalid_state` once it was applied "
                    "(an orphaned directive can always be removed).",
        tags=TAGS, parameters=[INSTANT_PARAMETER],
        responses={204: OpenApiResponse(description="Removed"), **error_responses(400, 401, 403, 404, 409)},
    )
    def delete(self, request, schedule_id, at):
        directive_delete(tenant=request.tenant, schedule_id=lookup_id(schedule_id), at=path_instant(at),
                         actor=request_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
