"""Worker protocol over HTTP: claim, heartbeat, result upload and completion.

Every call is fenced: the authority decides whether the caller still owns the run.
"""

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from kernel.clock import instant
from kernel.errors import Forbidden, InvalidRequest
from objectstore import download_filename
from runs import metrics
from runs.authority import check_result_size, complete, heartbeat
from runs.selectors import run_reread
from scheduler_project.http import api_docs, schemas
from scheduler_project.http.json import json_object_body
from scheduler_project.http.representations import run_representation
from scheduler_project.http.schemas import error_responses
from scheduler_project.http.validation import MAX_BIGINT, lookup_id, validate_body
from scheduler_project.http.views import WorkerAPIView, query_integer
from workers import intake
from workers.uploads import stage_result

TAGS = ["worker"]
MAX_CONTENT_TYPE_LENGTH = 200


class ClaimView(WorkerAPIView):
    @extend_schema(
        operation_id="worker_claim",
        summary="Claim a run",
        description=(
            "Takes the next claimable run of the given resource classes (all when omitted), fairly "
            "across tenants, and starts a new attempt under a lease of `leaseSeconds` (default: the "
            "job type's). The answer carries the fence that every later call for this attempt must "
            "present; 204 when nothing is claimable."
        ),
        examples=api_docs.CLAIM,
        tags=TAGS,
        request=schemas.ClaimSerializer,
        responses={
            200: schemas.ClaimResponseSerializer,
            204: OpenApiResponse(description="Nothing is claimable"),
            **error_responses(400, 401, 403),
        },
    )
    def post(self, request):
        body = validate_body(schemas.ClaimSerializer, json_object_body(request, allow_empty=True))
        claimed = intake.claim(
            worker_token=request.worker_token,
            worker_label=body.get("workerId") or "",
            resource_classes=_claimable_classes(request.worker_token, body.get("resourceClasses") or None),
            lease_seconds=body.get("leaseSeconds"),
            any_job_type=True,  # an HTTP worker runs its own code, whatever this process declares
        )
        if not claimed:
            return Response(status=status.HTTP_204_NO_CONTENT)
        [run] = claimed
        attempt = run.current_attempt
        return Response(
            {
                "runId": run.id,
                "attemptId": attempt.id,
                "fence": attempt.fence,
                "leaseExpiresAt": instant(attempt.lease_expires_at),
                "leaseSeconds": attempt.lease_seconds,
                "jobType": run.job_type,
                "params": (run.payload or {}).get("params", {}),
                "revision": run.revision,
                "scheduleId": run.schedule_id,
                "attempt": attempt.number,
            }
        )


def _claimable_classes(token, requested: list[str] | None) -> list[str] | None:
    """The classes a claim may take: a token limited to some classes claims within them."""
    allowed = token.resource_classes
    if not allowed:
        return requested
    if requested is None:
        return allowed
    outside = sorted(set(requested) - set(allowed))
    if outside:
        metrics.CREDENTIAL_REFUSALS.labels("claim").inc()
        raise Forbidden(f"this worker token may not claim resource classes {', '.join(outside)}")
    return requested


class HeartbeatView(WorkerAPIView):
    @extend_schema(
        operation_id="worker_heartbeat",
        summary="Extend an attempt's lease",
        description=(
            "Extends the lease to authority time plus the claim's `leaseSeconds` and tells the worker "
            "whether cancellation was requested. A fence that is no longer current (another attempt "
            "took over, or the lease passed) is 409 `stale_fence`: stop working on the run."
        ),
        examples=api_docs.HEARTBEAT,
        tags=TAGS,
        request=schemas.HeartbeatSerializer,
        responses={200: schemas.HeartbeatResponseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request):
        body = validate_body(schemas.HeartbeatSerializer, json_object_body(request))
        run = heartbeat(
            run_id=lookup_id(body["runId"]), attempt_id=lookup_id(body["attemptId"]), fence=body["fence"],
            worker_token=request.worker_token,
        )
        return Response(
            {
                "leaseExpiresAt": instant(run.lease_expires_at),
                "cancellationRequested": run.cancellation_requested,
            }
        )


class CompleteView(WorkerAPIView):
    @extend_schema(
        operation_id="worker_complete",
        summary="Finish an attempt",
        description=(
            "Ends the attempt as `succeeded` (with the staged object and its checksum, which becomes "
            "the run's one canonical result), `failed` (with `retryable: true` the retry policy may "
            "start another attempt; `reason: \"timeout\"` says the job ran past its job type's timeout) or "
            "`canceled`. A repeat of an accepted completion answers the saved run; a "
            "different outcome or checksum is 409 `invalid_state`; a fence that is no longer current "
            "is 409 `stale_fence`."
        ),
        examples=api_docs.COMPLETE,
        tags=TAGS,
        request=schemas.CompleteSerializer,
        responses={200: schemas.RunSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request):
        body = validate_body(schemas.CompleteSerializer, json_object_body(request))
        stored = body.get("object") or {}
        run = complete(
            run_id=lookup_id(body["runId"]),
            attempt_id=lookup_id(body["attemptId"]),
            fence=body["fence"],
            outcome=body["outcome"],
            object_key=stored.get("key"),
            version_id=stored.get("versionId"),
            checksum=body.get("checksum"),
            error=body.get("error", ""),
            retryable=body.get("retryable", False),
            reason=body.get("reason", ""),
            worker_token=request.worker_token,
        )
        return Response(run_representation(run_reread(run)))


class ResultUploadView(WorkerAPIView):
    query_parameters = {"put": frozenset({"fence", "filename"})}

    @extend_schema(
        operation_id="worker_result_upload",
        summary="Stage an attempt's result bytes",
        description=(
            "Stores the raw body as an immutable object of this attempt and answers its key, version "
            "and SHA-256. Nothing is published yet: `complete` makes it the run's result. Never "
            "overwrites: a repeat answers the same object only when its bytes, `Content-Type` and "
            "`filename` are identical, otherwise 409 `invalid_state`; a stale fence is 409 `stale_fence`. "
            "`filename` is the name downloads of the result carry (default `result`)."
        ),
        examples=api_docs.UPLOAD,
        tags=TAGS,
        parameters=[schemas.FENCE_PARAMETER, schemas.FILENAME_PARAMETER],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={201: schemas.UploadResponseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def put(self, request, run_id, attempt_id):
        fence = query_integer(request, "fence", default=None, minimum=0, maximum=MAX_BIGINT)
        if fence is None:
            raise InvalidRequest("fence is required", field="fence")
        content_type = request.META.get("CONTENT_TYPE", "") or "application/octet-stream"
        if len(content_type) > MAX_CONTENT_TYPE_LENGTH or not content_type.isprintable() or not content_type.isascii():
            raise InvalidRequest("unusable Content-Type", field="Content-Type")
        filename = request.query_params.get("filename", "")
        if filename and download_filename(filename) != filename:
            raise InvalidRequest(
                "filename must be a plain file name: no path, quote or control character, at most 200 characters",
                field="filename",
            )
        data = _read_raw_body(request)
        stored = stage_result(
            run_id=lookup_id(run_id),
            attempt_id=lookup_id(attempt_id),
            fence=fence,
            data=data,
            content_type=content_type,
            filename=filename,
            worker_token=request.worker_token,
        )
        return Response(
            {"object": {"key": stored.key, "versionId": stored.version_id}, "checksum": stored.checksum},
            status=status.HTTP_201_CREATED,
        )


def _read_raw_body(request) -> bytes:
    """The raw upload, bounded by RESULT_MAX_BYTES rather than the small JSON body limit: a
    declared length past it is refused before anything is read."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise InvalidRequest("bad Content-Length", field="Content-Length") from None
    check_result_size(declared)
    data = request._request.read(settings.RESULT_MAX_BYTES + 1)
    check_result_size(len(data))
    return data
