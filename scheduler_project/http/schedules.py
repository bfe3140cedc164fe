"""Tenant API: schedules, preview, pause/resume (one or in bulk), run once, run history,
revisions, the audit and job types."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from kernel.errors import InvalidRequest
from runs.authority import run_once, schedule_resume, schedules_resume_action
from runs.capacity.statistics import runtime_statistics
from runs.selectors import run_reread, runs_page
from schedule_services.bulk import schedules_pause_matching
from schedule_services.lifecycle import (
    rule_warnings, schedule_create, schedule_delete, schedule_edit, schedule_pause, schedule_preview,
)
from scheduler_project.http import api_docs, schemas
from scheduler_project.http.cursors import decode_cursor, encode_cursor
from scheduler_project.http.history import run_history_body
from scheduler_project.http.json import json_object_body
from scheduler_project.http.occurrences import edit_representation
from scheduler_project.http.representations import (
    audit_entry_representation, job_type_representation, preview_representation, revision_representation,
    run_representation, schedule_detail_representation, schedule_instants_representation, schedule_representation,
)
from scheduler_project.http.schedule_requests import (
    BulkPauseSerializer, BulkResumeSerializer, MAX_PREVIEW_COUNT, PauseSerializer, PreviewSerializer, RunOnceSerializer,
    ScheduleCreateSerializer, ScheduleUpdateSerializer, bulk_pause_arguments, label_filter, pause_arguments,
    preview_arguments, request_hash, run_once_arguments, schedule_edit_request, schedule_spec,
)
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import lookup_id, validate_body
from scheduler_project.http.views import (
    PAGE_PARAMETERS, TenantAPIView, idempotency_key, query_cursor, query_instant, query_integer, query_limit,
    request_actor,
)
from schedules.audit import audit_entries
from schedules.selectors import (
    job_types_allowed, occurrences_left, schedule_check_for_history, schedule_get, schedule_revisions, schedule_rule,
    schedules_list,
)

TAGS = ["schedules"]


def _created_status(created: bool) -> int:
    return status.HTTP_201_CREATED if created else status.HTTP_200_OK


class ScheduleCollectionView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS | {"label"}}

    @extend_schema(
        operation_id="schedules_list",
        summary="List schedules",
        description=(
            "The caller's schedules that are not deleted, oldest first, `limit` per page (1 to 200, "
            "default 50). Pass `nextCursor` back as `cursor` for the next page; it is null on the "
            "last one. `nextRunAt` is null while a schedule is paused. `label=key:value` (repeatable) "
            "lists only the schedules carrying every label given."
        ),
        examples=api_docs.SCHEDULE_LIST,
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER, schemas.LABEL_PARAMETER],
        responses={200: schemas.ScheduleListSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request):
        limit = query_limit(request)
        labels = label_filter(request.query_params.getlist("label"))
        scope = f"schedules:{request.tenant.id}"
        after_id = None
        if cursor := query_cursor(request):
            after_id = decode_cursor(scope, cursor).get("after")
            if not isinstance(after_id, str):
                raise InvalidRequest("invalid cursor", field="cursor")
        page = schedules_list(tenant=request.tenant, after_id=after_id, limit=limit + 1, labels=labels)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"after": page[-1].id})
        return Response(
            {"results": [schedule_representation(s) for s in page], "nextCursor": next_cursor}
        )

    @extend_schema(
        operation_id="schedules_create",
        summary="Create a schedule",
        description=(
            "Creates a recurring schedule at revision 1 and answers its first due instant "
            "(`nextRunAt`, and `nextRunAtLocal` in the rule's zone). Required: `name`, `jobType`, "
            "`recurrence`; everything else has a default (`misfirePolicy` latest_only, "
            "`overlapPolicy` buffer_one, the job type's retry policy).\n\nWith an `Idempotency-Key`, "
            "a retry with the same body returns the same schedule (200), and the same key with "
            "another body is 409 `idempotency_conflict`. A rule that does not parse is 400 "
            "`invalid_cron` or `invalid_timezone`; a job type the tenant may not use is 403 "
            "`job_type_forbidden`; a full `max-schedules` quota is 429 `quota_exceeded`, and nothing "
            "is created."
        ),
        examples=api_docs.SCHEDULE_CREATE,
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
            tenant=request.tenant, spec=schedule_spec(body), idempotency_key=key, request_hash=request_hash(body),
            actor=request_actor(request),
        )
        return Response(schedule_detail_representation(schedule), status=_created_status(created))


class SchedulePreviewView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_preview",
        summary="Preview the next instants of a rule",
        description=(
            "Resolves a recurrence without creating anything: the next `count` instants (1 to 100, "
            "default 5) strictly after `after` (default now), each in UTC and as local wall-clock "
            "time in the rule's zone. Daylight-saving gaps and repeats resolve exactly as a schedule "
            "would run them."
        ),
        examples=api_docs.PREVIEW,
        tags=TAGS,
        request=PreviewSerializer,
        responses={200: schemas.PreviewResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request):
        arguments = preview_arguments(json_object_body(request))
        instants = schedule_preview(**arguments, tenant=request.tenant)
        return Response({**preview_representation(instants),
                         "warnings": rule_warnings(arguments["rule"], arguments.get("after"))})


class ScheduleDetailView(TenantAPIView):
    schema = schemas.RequiredPatchFieldsSchema()

    @extend_schema(
        operation_id="schedules_retrieve",
        summary="Get a schedule",
        description=(
            "The schedule's current revision. Another tenant's schedule, or a deleted one, is 404 "
            "`not_found`."
        ),
        examples=api_docs.SCHEDULE_DETAIL,
        tags=TAGS,
        responses={200: schemas.ScheduleSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        return Response(schedule_detail_representation(schedule))

    @extend_schema(
        operation_id="schedules_update",
        summary="Revise a schedule",
        description=(
            "Changes any of `name`, `params`, `recurrence`, `misfirePolicy`, `misfireGraceSeconds`, "
            "`overlapPolicy`, `retry` and `effects` (not `jobType`) and answers the schedule at "
            "revision N+1. `expectedRevision` is required: if it is not current the answer is 409 "
            "`revision_conflict` with the current schedule in `details.current`. Occurrences already "
            "materialized keep the revision they were created under. The answer carries `instantsDiff` "
            "(`added`, `removed`: the instants the edit changes over the next 30 days, at most 200 each) and "
            "`orphanedDirectives`: the occurrence directives whose instants the new rule no longer produces "
            "(kept, listed by `GET .../occurrences?orphaned=true`). With `\"dryRun\": true` the answer is the "
            "schedule the edit would store, and nothing is stored."
        ),
        tags=TAGS,
        request=ScheduleUpdateSerializer,
        responses={200: schemas.ScheduleSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def patch(self, request, schedule_id):
        expected_revision, changes, dry_run = schedule_edit_request(json_object_body(request))
        edit = schedule_edit(
            tenant=request.tenant,
            schedule_id=lookup_id(schedule_id),
            expected_revision=expected_revision,
            changes=changes,
            actor=request_actor(request),
            dry_run=dry_run,
        )
        return Response(edit_representation(edit))

    @extend_schema(
        operation_id="schedules_destroy",
        summary="Delete a schedule",
        description=(
            "Stops the schedule for good (204). Afterwards `GET` of the schedule is 404, while its "
            "run history and its runs stay readable."
        ),
        tags=TAGS,
        responses={204: OpenApiResponse(description="Deleted"), **error_responses(401, 403, 404)},
    )
    def delete(self, request, schedule_id):
        schedule_delete(tenant=request.tenant, schedule_id=lookup_id(schedule_id), actor=request_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SchedulePauseView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_pause",
        summary="Pause a schedule",
        description=(
            "No new occurrences are materialized while paused and `nextRunAt` is null. Runs already "
            "created are not affected. The body is optional: `until` (an instant after now) ends the "
            "pause by itself then, on the database's clock, as a resume would (misfire policy "
            "included); `reason` (one line, at most 500 characters) is shown as `pauseReason`. "
            "Pausing a paused schedule with no body changes nothing; with `until` or `reason` they "
            "replace the pause's (`until: null` removes its end), and a bulk action's resume no "
            "longer ends it."
        ),
        examples=api_docs.SCHEDULE_PAUSED,
        tags=TAGS,
        request=PauseSerializer,
        responses={200: schemas.ScheduleSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request, schedule_id):
        given = pause_arguments(json_object_body(request, allow_empty=True))
        schedule = schedule_pause(
            tenant=request.tenant, schedule_id=lookup_id(schedule_id), actor=request_actor(request), **given
        )
        return Response(schedule_detail_representation(schedule))


class ScheduleResumeView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_resume",
        summary="Resume a schedule",
        description=(
            "Schedules the rule again. Instants that fell while it was paused are handled by its "
            "`misfirePolicy`: `latest_only` runs the latest and records the others as skipped, `skip` "
            "skips them all, `run_all` runs each (at most 100 per scan cycle). Resuming a schedule "
            "that is not paused changes nothing."
        ),
        examples=api_docs.SCHEDULE_DETAIL,
        tags=TAGS,
        request=None,
        responses={200: schemas.ScheduleSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request, schedule_id):
        schedule = schedule_resume(
            tenant=request.tenant, schedule_id=lookup_id(schedule_id), actor=request_actor(request)
        )
        return Response(schedule_detail_representation(schedule))


class BulkPauseView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_bulk_pause",
        summary="Pause every schedule a filter matches",
        description=(
            "Pauses the caller's live schedules that carry every label of `filter.labels` and are of "
            "`filter.jobType` (when given), with the `until` and `reason` of a single pause. The filter "
            "must name at least one label or a jobType (an empty one is 400: it would pause "
            "everything). `paused` counts the schedules this action paused; those already paused are "
            "left as they are and not counted. The work is done in batches of 500, each its own "
            "transaction: a schedule created or resumed while it runs may be missed."
        ),
        tags=TAGS,
        request=BulkPauseSerializer,
        responses={200: schemas.BulkPauseResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request):
        action = schedules_pause_matching(
            tenant=request.tenant, actor=request_actor(request), **bulk_pause_arguments(json_object_body(request))
        )
        return Response({"actionId": action.id, "paused": action.paused})


class BulkResumeView(TenantAPIView):
    @extend_schema(
        operation_id="schedules_bulk_resume",
        summary="Resume the schedules a bulk pause paused",
        description=(
            "Resumes exactly the schedules the action `actionId` paused that are still paused by it: "
            "one resumed by hand since, or paused again (which makes the pause that request's), is "
            "left alone. Each resume applies the schedule's misfire policy. `resumed` counts the "
            "schedules this request resumed; repeating it resumes none twice. Another tenant's "
            "action is 404."
        ),
        tags=TAGS,
        request=BulkResumeSerializer,
        responses={200: schemas.BulkResumeResponseSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request):
        body = validate_body(BulkResumeSerializer, json_object_body(request))
        action, resumed = schedules_resume_action(
            tenant=request.tenant, action_id=body["action_id"], actor=request_actor(request)
        )
        return Response({"actionId": action.id, "resumed": resumed})


class AuditView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS | {"scheduleId", "since"}}

    @extend_schema(
        operation_id="audit_list",
        summary="Who changed which schedule, and when",
        description=(
            "The caller's audit entries, newest first: `create`, `update` (with the `revision` "
            "written), `pause` (`until`, `reason`, `actionId` when a bulk action paused it), "
            "`resume` (`timed: true` when a timed pause ended; `actionId` for a bulk resume) and "
            "`delete`. `actor` is the API token's name (`actorKind` api), the staff user's username "
            "(admin) or `scheduler`. Optional `scheduleId` (deleted schedules included) and `since` "
            "(entries at or after that instant). Paged by `limit` and `cursor`."
        ),
        tags=["audit"],
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER, schemas.SCHEDULE_ID_PARAMETER,
                    schemas.SINCE_PARAMETER],
        responses={200: schemas.AuditListSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request):
        limit = query_limit(request)
        schedule_id = request.query_params.get("scheduleId")
        if schedule_id is not None:
            schedule_id = lookup_id(schedule_id)
        since = query_instant(request, "since")
        scope = f"audit:{request.tenant.id}"
        before = None
        if cursor := query_cursor(request):
            before = decode_cursor(scope, cursor).get("before")
            if isinstance(before, bool) or not isinstance(before, int):
                raise InvalidRequest("invalid cursor", field="cursor")
        page = audit_entries(tenant=request.tenant, schedule_id=schedule_id, since=since, before=before,
                             limit=limit + 1)
        next_cursor = None
        if len(page) > limit:
            page = page[:limit]
            next_cursor = encode_cursor(scope, {"before": page[-1].id})
        return Response({"results": [audit_entry_representation(e) for e in page], "nextCursor": next_cursor})


class ScheduleRunsView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS}

    @extend_schema(
        operation_id="schedules_runs_list",
        summary="List a schedule's runs",
        description=(
            "The schedule's occurrences, newest `scheduledAt` first, with their attempts, result and "
            "effects. The first page pins an upper bound, carried by `nextCursor`, so runs created "
            "while you page never make you skip or repeat older ones; `watermark` is the instant "
            "before which every created run is reflected. Works for deleted schedules too."
        ),
        examples=api_docs.RUN_LIST,
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER],
        responses={200: schemas.RunListSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        schedule_id = lookup_id(schedule_id)

        def read_page(**page):
            schedule_check_for_history(tenant=request.tenant, schedule_id=schedule_id)
            return runs_page(schedule_id=schedule_id, **page)

        return Response(run_history_body(request, scope=f"runs:{schedule_id}", read_page=read_page))

    @extend_schema(
        operation_id="schedules_runs_create",
        summary="Run a schedule once",
        description=(
            "Creates one manual occurrence with the schedule's current revision, optionally with "
            "`params` overriding the schedule's and a `runAt` (default now; a future one waits as "
            "`pending`). The overlap policy applies as to scheduled runs. An `Idempotency-Key` is "
            "scoped to the schedule and kept at least 24 hours: repeating it returns the same run."
        ),
        examples=api_docs.RUN_ONCE,
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
        return Response(run_representation(run_reread(run)), status=_created_status(created))


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
        schedule_check_for_history(tenant=request.tenant, schedule_id=schedule_id)
        page = schedule_revisions(schedule_id=schedule_id, before=before, limit=limit + 1)
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
            "`after_completion` rule answers one instant, its delay after `after`. Only instants in the "
            "schedule's window (`activeFrom`, `activeUntil`) are listed, at most the `endAfterOccurrences` "
            "it has left. Nothing changes."
        ),
        examples=api_docs.SCHEDULE_PREVIEW,
        tags=TAGS,
        parameters=[schemas.COUNT_PARAMETER, schemas.AFTER_PARAMETER],
        responses={200: schemas.ScheduleInstantsSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request, schedule_id):
        count = query_integer(request, "count", default=None, minimum=1, maximum=MAX_PREVIEW_COUNT)
        given = {"count": count} if count is not None else {}  # else the service's default
        after = query_instant(request, "after")
        schedule = schedule_get(tenant=request.tenant, schedule_id=lookup_id(schedule_id))
        rule = schedule_rule(schedule)
        left = occurrences_left(schedule)
        if left is not None:  # endAfterOccurrences: no more than the instants it has left
            given["count"] = min(given.get("count", 5), left)
        instants = schedule_preview(rule=rule, after=after, **given) if rule is not None and left != 0 else []
        return Response(schedule_instants_representation(schedule, instants))


class JobTypeListView(TenantAPIView):
    @extend_schema(
        operation_id="job_types_list",
        summary="List the job types this tenant may use",
        description=(
            "Every enabled job type the caller may schedule, by name: the JSON Schema its `params` "
            "must match, its resource class, the default lease of a claim, its timeout, and the retry "
            "policy a new schedule of that type starts with. A schedule naming any other job type is "
            "400 `invalid_request` on `jobType` (or 403 `job_type_forbidden` for an existing type the "
            "tenant may not use). `statistics`: duration and queue delay percentiles of the caller's own "
            "accepted attempts of the type over a rolling window, and the duration forecasts expect of one "
            "run of it (from every tenant's runs)."
        ),
        examples=api_docs.JOB_TYPES,
        tags=["job types"],
        responses={200: schemas.JobTypeListSerializer, **error_responses(401, 403)},
    )
    def get(self, request):
        job_types = job_types_allowed(tenant=request.tenant)
        names = [t.name for t in job_types]
        # The tenant's own runs: another tenant's backlog or inputs never move this view. What
        # forecasts expect of a run comes from every tenant's runs (they share the slots).
        own, every = runtime_statistics(names, tenant=request.tenant), runtime_statistics(names)
        return Response({"results": [job_type_representation(t, own[t.name], every[t.name].expected_duration())
                                     for t in job_types]})
