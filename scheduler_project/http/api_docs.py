"""What the served API docs show beyond the serializers: examples, and each job type's parameters.

The examples are real requests and answers (taken from a running system), so the fuzz tests,
which replay request examples, exercise them too.
"""

import json

from drf_spectacular.utils import OpenApiExample

from workers.jobs import builtin  # noqa: F401 - registers the declarations the examples show
from workers.jobs.framework import declared_jobs


SCHEDULE_ID = "sch_01m8x9rx004ac882m19qd788hd"
RUN_ID = "run_01m8x9rx06gvqw882p88hxzzr8"
ATTEMPT_ID = "att_01m8x9rx0fdjc9aceyahw8hjay"
CHECKSUM = "sha256:8d222ae4a930a4e8aaf9238b608bb227908d041d0f5b8ea01880c46ff1bf9a51"
OBJECT = {"key": f"runs/{RUN_ID}/{ATTEMPT_ID}/result", "versionId": CHECKSUM.removeprefix("sha256:")}
WEEKDAYS_0900_NEW_YORK = {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"}

SCHEDULE = {
    "scheduleId": SCHEDULE_ID,
    "name": "sales-report",
    "jobType": "report.sales",
    "params": {"region": "us"},
    "recurrence": WEEKDAYS_0900_NEW_YORK,
    "misfirePolicy": "latest_only",
    "misfireGraceSeconds": 60,
    "overlapPolicy": "buffer_one",
    "retry": {"maxAttempts": 3, "initialDelaySeconds": 5, "maxDelaySeconds": 300},
    "effects": {"email": {"to": ["sales@example.com"]}},
    "labels": {"team": "sales"},
    "revision": 1,
    "paused": False,
    "pausedUntil": None,
    "pauseReason": None,
    "pauseActionId": None,
    "nextRunAt": "2026-12-03T14:00:00Z",
    "nextRunAtLocal": "2026-12-03T09:00:00-05:00",
    "createdAt": "2026-12-03T06:34:21.569156Z",
    "updatedAt": "2026-12-03T06:34:21.569163Z",
}
RUN_QUEUED = {
    "runId": RUN_ID, "scheduleId": SCHEDULE_ID, "revision": 1, "trigger": "manual", "jobType": "report.sales",
    "state": "queued", "pendingReason": None, "attempt": 0, "maxAttempts": 3,
    "scheduledAt": "2026-12-03T06:34:21.574155Z", "dueAt": "2026-12-03T06:34:21.574155Z",
    "startedAt": None, "finishedAt": None, "skipReason": None, "note": None, "skippedCount": None, "skippedThrough": None,
    "cancellationRequested": False, "cancellationAccepted": False, "error": None,
    "attempts": [], "result": None, "effects": [], "createdAt": "2026-12-03T06:34:21.574155Z",
}
RUN_SUCCEEDED = RUN_QUEUED | {
    "state": "succeeded", "attempt": 1,
    "startedAt": "2026-12-03T06:34:21.583174Z", "finishedAt": "2026-12-03T06:34:21.598611Z",
    "attempts": [{"attemptId": ATTEMPT_ID, "number": 1, "state": "succeeded",
                  "startedAt": "2026-12-03T06:34:21.583174Z", "finishedAt": "2026-12-03T06:34:21.598611Z",
                  "error": None}],
    "result": {"checksum": CHECKSUM, "size": 21, "contentType": "text/csv"},
    "effects": [{"action": f"send-{RUN_ID}", "kind": "email", "state": "pending"}],
}


def _example(name: str, value, *, summary: str = "", request: bool = False, response: bool = False, status=None):
    return OpenApiExample(
        name, value=value, summary=summary or name, request_only=request, response_only=response,
        status_codes=[str(status)] if status else None,
    )


SCHEDULE_CREATE = [
    _example("Weekday sales report", {
        "name": "sales-report", "jobType": "report.sales", "params": {"region": "us"},
        "recurrence": WEEKDAYS_0900_NEW_YORK, "effects": {"email": {"to": ["sales@example.com"]}},
    }, summary="09:00 New York time, Monday to Friday, mailed to sales", request=True),
    _example("Every 15 minutes", {
        "name": "heartbeat-job", "jobType": "demo.sleep", "params": {"seconds": 2},
        "recurrence": {"kind": "interval", "everySeconds": 900, "anchor": "2026-01-01T00:00:00Z"},
        "overlapPolicy": "skip", "misfirePolicy": "skip",
        "retry": {"maxAttempts": 5, "initialDelaySeconds": 10, "maxDelaySeconds": 600},
    }, summary="Fixed interval from an anchor; overlapping instants are skipped", request=True),
    _example("Ten minutes after the last one finished", {
        "name": "nightly-export", "jobType": "demo.export", "params": {"seconds": 30},
        "recurrence": {"kind": "after_completion", "delaySeconds": 600},
        "effects": {"webhook": {"url": "https://hooks.example.com/exports"}},
    }, request=True),
    _example("Created", SCHEDULE, response=True, status=201),
]
SCHEDULE_LIST = [_example("A page", {"results": [SCHEDULE], "nextCursor": None}, response=True, status=200)]
SCHEDULE_DETAIL = [_example("A schedule", SCHEDULE, response=True, status=200)]
SCHEDULE_PAUSED = [
    _example("Until Monday morning", {"until": "2030-01-07T08:00:00Z", "reason": "quarter-end freeze"},
             summary="A timed pause: it ends by itself then", request=True),
    _example("Paused", SCHEDULE | {"paused": True, "nextRunAt": None, "nextRunAtLocal": None,
                                   "pausedUntil": "2030-01-07T08:00:00Z", "pauseReason": "quarter-end freeze"},
             response=True, status=200),
]
# No request examples for PATCH /schedules/{id} and POST /schedules/preview yet: the fuzz test
# builds its cases from request examples and then reaches two validation gaps in schedules/
# (a webhook URL of 2001 to 2008 characters is accepted although the schema says at most 2000;
# preview accepts "after": null although the schema does not allow null).
PREVIEW = [
    _example("Three instants", {"instants": [
        {"at": "2027-03-13T07:30:00Z", "local": "2027-03-13T02:30:00-05:00"},
        {"at": "2027-03-14T07:30:00Z", "local": "2027-03-14T03:30:00-04:00"},
        {"at": "2027-03-15T06:30:00Z", "local": "2027-03-15T02:30:00-04:00"},
    ]}, summary="2027-03-14 02:30 does not exist in New York: it fires at 03:30 EDT", response=True, status=200),
]
_REVISION_1 = {"revision": 1, "createdAt": SCHEDULE["createdAt"], "authorKind": "api"} | {
    key: SCHEDULE[key]
    for key in ("name", "params", "recurrence", "misfirePolicy", "misfireGraceSeconds", "overlapPolicy", "retry", "effects")
}
_REVISION_2 = _REVISION_1 | {"revision": 2, "createdAt": "2026-12-03T07:02:10.118240Z",
                             "effects": {"email": {"to": ["sales@example.com", "finance@example.com"]}}}
REVISIONS = [_example("Two revisions", {"results": [_REVISION_2, _REVISION_1], "nextCursor": None},
                      summary="Revision 2 added a recipient", response=True, status=200)]
SCHEDULE_PREVIEW = [
    _example("Next three weekdays", {"instants": [
        {"at": "2026-12-03T14:00:00Z", "local": "2026-12-03T09:00:00-05:00"},
        {"at": "2026-12-04T14:00:00Z", "local": "2026-12-04T09:00:00-05:00"},
        {"at": "2026-12-07T14:00:00Z", "local": "2026-12-07T09:00:00-05:00"},
    ]}, summary="count=3 for a weekday 09:00 New York rule", response=True, status=200),
]
RUN_ONCE = [
    _example("Now, with the schedule's parameters", {}, request=True),
    _example("Later, for another region", {"params": {"region": "eu"}, "runAt": "2030-01-02T09:00:00Z"},
             summary="A future runAt waits as pending", request=True),
    _example("Queued", RUN_QUEUED, response=True, status=201),
]
RUN_LIST = [_example("A page", {"results": [RUN_SUCCEEDED], "nextCursor": None,
                                "watermark": "2026-12-03T06:35:00Z"}, response=True, status=200)]
RUN_DETAIL = [_example("Succeeded, email pending", RUN_SUCCEEDED, response=True, status=200)]
RUN_CANCEL = [_example("Canceled before it started",
                       RUN_QUEUED | {"state": "canceled", "finishedAt": "2026-12-03T06:34:22.102311Z"},
                       response=True, status=200)]
RUN_REPLAY = [
    _example("Why", {"note": "upstream fixed the export; INC-4211"}, request=True),
    _example("Queued again", RUN_QUEUED | {
        "trigger": "schedule", "attempt": 3, "maxAttempts": 6, "startedAt": "2026-12-03T06:00:00.812Z",
        "attempts": [{"attemptId": f"att_{n}", "number": n, "state": "failed", "startedAt": "2026-12-03T06:00:00.812Z",
                      "finishedAt": "2026-12-03T06:00:01.204Z", "error": "PermanentJobError('upstream down')",
                      "replay": None} for n in (1, 2, 3)],
        "replays": [{"at": "2026-12-03T09:12:44.5Z", "actor": "finance-ops",
                     "note": "upstream fixed the export; INC-4211", "afterAttempt": 3}],
    }, response=True, status=200),
]
RUN_RESULT = [_example("Signed link", {
    "url": "https://scheduler.example.com/api/v1/objects/.eJxFjMsOwiAUBf-FtUkvSOm5_RlzKWBTH1H6rvHfZedmNjOZj7qpVuX5",
    "expiresAt": "2026-12-03T06:39:21Z", "checksum": CHECKSUM,
}, response=True, status=200)]
JOB_TYPES = [_example("Two job types", {"results": [
    {"name": "demo.sleep", "resourceClass": "short", "paramsSchema": declared_jobs()["demo.sleep"].params_schema,
     "paramsSchemaVersion": 1, "leaseSeconds": 30, "timeoutSeconds": 3600,
     "retry": {"maxAttempts": 3, "initialDelaySeconds": 5, "maxDelaySeconds": 300}, "uncertainEffectPolicy": "retry"},
    {"name": "report.sales", "resourceClass": "short",
     "paramsSchema": declared_jobs()["report.sales"].params_schema,
     "paramsSchemaVersion": 1, "leaseSeconds": 30, "timeoutSeconds": 300,
     "retry": {"maxAttempts": 3, "initialDelaySeconds": 5, "maxDelaySeconds": 300}, "uncertainEffectPolicy": "hold"},
]}, response=True, status=200)]
CLAIM = [
    _example("Short jobs, 30 s lease", {"workerId": "host-a/1", "resourceClasses": ["short"], "leaseSeconds": 30},
             request=True),
    _example("Claimed", {
        "runId": RUN_ID, "attemptId": ATTEMPT_ID, "fence": 1, "leaseExpiresAt": "2026-12-03T06:34:51.583174Z",
        "leaseSeconds": 30, "jobType": "report.sales", "params": {"region": "us"}, "revision": 1,
        "scheduleId": SCHEDULE_ID, "attempt": 1,
    }, response=True, status=200),
]
HEARTBEAT = [
    _example("Extend the lease", {"runId": RUN_ID, "attemptId": ATTEMPT_ID, "fence": 1}, request=True),
    _example("Extended", {"leaseExpiresAt": "2026-12-03T06:34:51.587110Z", "cancellationRequested": False},
             response=True, status=200),
    _example("Fence no longer current", {"error": {
        "code": "stale_fence", "message": "fence 1 is no longer current", "details": {},
    }}, summary="Stop working on this run: its result can no longer be accepted", response=True, status=409),
]
UPLOAD = [_example("Staged", {"object": OBJECT, "checksum": CHECKSUM}, response=True, status=201)]
COMPLETE = [
    _example("Succeeded", {"runId": RUN_ID, "attemptId": ATTEMPT_ID, "fence": 1, "outcome": "succeeded",
                           "object": OBJECT, "checksum": CHECKSUM}, request=True),
    _example("Failed, worth retrying", {"runId": RUN_ID, "attemptId": ATTEMPT_ID, "fence": 1, "outcome": "failed",
                                        "error": "database unavailable", "retryable": True}, request=True),
    _example("Canceled on request", {"runId": RUN_ID, "attemptId": ATTEMPT_ID, "fence": 1, "outcome": "canceled"},
             request=True),
    _example("Published", RUN_SUCCEEDED, response=True, status=200),
]


def job_type_parameters_markdown() -> str:
    """The declared job types and their parameter schemas, as a Markdown list for descriptions."""
    lines = ["`params` are validated against the job type's JSON Schema; unknown keys are `invalid_request`."]
    for name, spec in declared_jobs().items():
        properties = spec.params_schema.get("properties", {})
        described = ", ".join(f"`{key}`: `{json.dumps(schema, sort_keys=True)}`" for key, schema in properties.items())
        lines.append(
            f"- `{name}` (resource class `{spec.resource_class}`, lease {spec.default_lease_seconds} s, "
            f"timeout {spec.timeout_seconds} s, {spec.max_attempts} attempts): {described or 'no parameters'}"
        )
    return "\n".join(lines)


def describe_job_type_params(result, generator, request, public):
    """drf-spectacular postprocessing hook: every request body's `params` lists the job types."""
    description = job_type_parameters_markdown()
    for name, component in result.get("components", {}).get("schemas", {}).items():
        params = component.get("properties", {}).get("params")
        if params is not None and name.endswith("Request"):
            params["description"] = description
    return result
