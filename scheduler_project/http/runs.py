"""Tenant API: one run (read from the authority), cancel, replay, and its result's download URL."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from kernel.clock import instant
from runs.authority import run_cancel, run_release, run_replay
from runs.results import result_download
from runs.selectors import run_get, run_reread, tenant_runs_page
from scheduler_project.http import api_docs, schemas
from scheduler_project.http.history import run_history_body
from scheduler_project.http.json import json_object_body
from scheduler_project.http.representations import run_representation
from scheduler_project.http.run_requests import RUN_FILTERS, ReplaySerializer, run_filters, run_filters_scope
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import lookup_id, validate_body
from scheduler_project.http.views import PAGE_PARAMETERS, TenantAPIView, request_actor
from schedules.selectors import schedule_check_for_history

TAGS = ["runs"]


class RunCollectionView(TenantAPIView):
    query_parameters = {"get": PAGE_PARAMETERS | RUN_FILTERS}

    @extend_schema(
        operation_id="runs_list",
        summary="List runs across the tenant's schedules",
        description=(
            "Every run of the caller's schedules (deleted ones included), newest `scheduledAt` first, "
            "narrowed by any of `state` (one or several, comma-separated), `scheduleId`, `jobType` and "
            "`since` (scheduledAt at or after it): `?state=failed&since=2026-12-02T18:00:00Z` is what "
            "failed last night. Paged like a schedule's history: `nextCursor` pins the first page's "
            "`watermark`, and a cursor works only with the filters it came from. A bad filter is 400 "
            "`invalid_request` naming it; another tenant's `scheduleId` is 404."
        ),
        examples=api_docs.RUN_LIST,
        tags=TAGS,
        parameters=[schemas.LIMIT_PARAMETER, schemas.CURSOR_PARAMETER, *schemas.RUN_FILTER_PARAMETERS],
        responses={200: schemas.RunListSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request):
        filters = run_filters(request.query_params)

        def read_page(**page):
            if "schedule_id" in filters:
                schedule_check_for_history(tenant=request.tenant, schedule_id=filters["schedule_id"])
            return tenant_runs_page(tenant=request.tenant, **filters, **page)

        scope = run_filters_scope(request.tenant.id, filters)
        return Response(run_history_body(request, scope=scope, read_page=read_page))


class RunDetailView(TenantAPIView):
    @extend_schema(
        operation_id="runs_retrieve",
        summary="Get a run",
        description=(
            "One occurrence read from the authoritative tables: its state, every attempt (an expired "
            "lease shows as an `expired` attempt), the canonical result's checksum once it succeeded, "
            "and the state of each effect (email, webhook) of that result."
        ),
        examples=api_docs.RUN_DETAIL,
        tags=TAGS,
        responses={200: schemas.RunSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request, run_id):
        run = run_get(tenant=request.tenant, run_id=lookup_id(run_id))
        return Response(run_representation(run))


class RunCancelView(TenantAPIView):
    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a run",
        description=(
            "A run that has not started (`pending`, `queued`) becomes `canceled`. A running one gets "
            "`cancellationRequested: true` and stays `running` until its worker observes the request "
            "(or its lease ends); then it is `canceled` with `cancellationAccepted: true`. A finished "
            "run is 409 `invalid_state`. Effects already delivered cannot be recalled."
        ),
        examples=api_docs.RUN_CANCEL,
        tags=TAGS,
        request=None,
        responses={200: schemas.RunSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request, run_id):
        run = run_cancel(tenant=request.tenant, run_id=lookup_id(run_id))
        return Response(run_representation(run_reread(run)))


class RunReleaseView(TenantAPIView):
    @extend_schema(
        operation_id="runs_release",
        summary="Release a held run",
        description=(
            "A run held by a `hold` directive (`pending`, `pendingReason: held`) is admitted as if it had just "
            "been materialized: `queued` (or `pending` for its schedule's overlap guard or its jittered due "
            "time). Any other run is 409 `invalid_state`. Recorded in the audit (`release`)."
        ),
        tags=TAGS,
        request=None,
        responses={200: schemas.RunSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request, run_id):
        run = run_release(tenant=request.tenant, run_id=lookup_id(run_id), actor=request_actor(request))
        return Response(run_representation(run_reread(run)))


class RunReplayView(TenantAPIView):
    @extend_schema(
        operation_id="runs_replay",
        summary="Replay a failed run",
        description=(
            "The same occurrence runs again: a `failed` run becomes `queued` for a new attempt, which its claim "
            "gives a higher fence, with a fresh retry budget (`maxAttempts` grows by the run's retry "
            "`maxAttempts`). Its effects keep their identity (`send-<runId>`): a replayed success mails once. "
            "The replay is recorded on the run (`replays`: `at`, `actor` the token's name, `note`, "
            "`afterAttempt`) and on the first attempt it starts (`replay`). Any other state, or a run of a deleted "
            "schedule, is 409 `invalid_state`; a job type with no declaration is 409 `job_type_unavailable`; "
            "another tenant's run is 404; a `note` longer than 500 characters or with a control character is 400."
        ),
        examples=api_docs.RUN_REPLAY,
        tags=TAGS,
        request=ReplaySerializer,
        responses={200: schemas.RunSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request, run_id):
        body = validate_body(ReplaySerializer, json_object_body(request, allow_empty=True))
        run = run_replay(tenant=request.tenant, run_id=lookup_id(run_id), note=body.get("note", ""),
                         actor=request.auth.name)
        return Response(run_representation(run_reread(run)))


class RunResultView(TenantAPIView):
    @extend_schema(
        operation_id="runs_result",
        summary="Get a signed link to a run's result",
        description=(
            "An absolute URL that serves exactly the canonical result version of a succeeded run, "
            "without an Authorization header, until `expiresAt`; `checksum` is the SHA-256 the worker "
            "published. Before success the answer is 409 `invalid_state`."
        ),
        examples=api_docs.RUN_RESULT,
        tags=TAGS,
        responses={200: schemas.ResultUrlSerializer, **error_responses(401, 403, 404, 409)},
    )
    def get(self, request, run_id):
        # Links are built from the configured public URL, never from the request's Host header.
        download = result_download(tenant=request.tenant, run_id=lookup_id(run_id), base_url=settings.PUBLIC_BASE_URL)
        return Response(
            {
                "url": download["url"],
                "expiresAt": instant(download["expiresAt"]),
                "checksum": download["checksum"],
            }
        )
