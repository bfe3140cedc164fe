"""The built-in job type ``celery.task``: an existing Celery task, run as a scheduler job.

Params ``{"task": "billing.tasks.export", "args": [...], "kwargs": {...}}``. The worker looks
the task up in its own Celery app's registry and calls it synchronously, in the worker
process, the way Celery's "calling a task directly" does (``task(*args, **kwargs)``: a custom
``Task.__call__`` still applies; no message is sent, ``self.request.id`` is None). So the task
runs under the attempt's lease and fence like any job: once per occurrence, retried with the
schedule's backoff, and its return value, as JSON, is the run's canonical result.

- A task whose function takes a ``scheduler_context`` parameter receives the JobContext under
  that name, so it can call ``scheduler_context.checkpoint()`` (cancellation, timeout, lost
  ownership) and ``sleep()``. Tasks without it are called with their args and kwargs only.
- ``self.retry()`` (``celery.exceptions.Retry``) and the task's ``autoretry_for`` exceptions
  end the attempt as retryable; any other exception fails it for good. The schedule's retry
  settings decide how many attempts and how long between them, not the task's. (Called
  directly, ``self.retry(exc=e)`` re-raises ``e`` itself: retryable only if in autoretry_for.)
- A task name not registered in the worker's Celery app fails the attempt permanently;
  so does one no longer on the run's tenant's allowlist (``Tenant.celery_tasks``).
"""

from __future__ import annotations

import inspect
import json

from django.core.serializers.json import DjangoJSONEncoder

from runs.models import Run
from schedules.celery_task_allowlist import CELERY_TASK_JOB_TYPE, MAX_TASK_NAME_LENGTH, TASK_NAME_PATTERN
from workers.jobs.framework import JobContext, JobOutput, PermanentJobError, TransientJobError, scheduler_job

CONTEXT_PARAMETER = "scheduler_context"


@scheduler_job(
    CELERY_TASK_JOB_TYPE,
    resource_class="short",
    lease_seconds=30,
    timeout_seconds=3600,
    max_attempts=3,
    uncertain_effect_policy="hold",
    params_schema_version=1,
    params_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["task"],
        "properties": {
            "task": {"type": "string", "minLength": 1, "maxLength": MAX_TASK_NAME_LENGTH,
                     "pattern": TASK_NAME_PATTERN},
            "args": {"type": "array", "maxItems": 100},
            "kwargs": {"type": "object", "propertyNames": {"not": {"const": CONTEXT_PARAMETER}}},
        },
    },
)
def celery_task(ctx: JobContext) -> JobOutput:
    name = ctx.params["task"]
    _check_still_allowed(ctx.run_id, name)
    task = _registered_task(name)
    args, kwargs = list(ctx.params.get("args") or []), dict(ctx.params.get("kwargs") or {})
    if _takes_context(task):
        kwargs[CONTEXT_PARAMETER] = ctx
    ctx.checkpoint()
    value = _call(task, args, kwargs)
    ctx.checkpoint()
    try:
        data = json.dumps(value, cls=DjangoJSONEncoder, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise PermanentJobError(f"Celery task {name} returned a value that is not JSON: {exc}") from None
    return JobOutput(data, "application/json", f"{name.replace(':', '_')}-{ctx.run_id}.json")


def _check_still_allowed(run_id: str, name: str) -> None:
    """The allowlist was checked when the schedule or manual run was written; an operator may
    have taken the task off it since."""
    allowed = Run.objects.filter(id=run_id).values_list("tenant__celery_tasks", flat=True).first()
    if name not in (allowed or []):
        raise PermanentJobError(f"Celery task {name} is not on this tenant's allowlist (any more)")


def _registered_task(name: str):
    from scheduler_project.celery import app

    try:
        return app.tasks[name]
    except KeyError:  # celery.exceptions.NotRegistered
        raise PermanentJobError(
            f"Celery task {name} is not registered in this worker's Celery app; deploy the module that "
            f"defines it to the workers (an installed app's tasks.py, or SCHEDULER_JOB_MODULES)"
        ) from None


def _takes_context(task) -> bool:
    try:
        parameters = inspect.signature(task.run).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get(CONTEXT_PARAMETER)
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    )


def _call(task, args: list, kwargs: dict):
    from celery.exceptions import Retry

    retry_on = tuple(getattr(task, "autoretry_for", ()) or ())
    never_retry_on = tuple(getattr(task, "dont_autoretry_for", ()) or ())
    try:
        return task(*args, **kwargs)
    except Retry as exc:
        raise TransientJobError(f"Celery task {task.name} asked to retry: {exc}") from exc
    except Exception as exc:
        if retry_on and isinstance(exc, retry_on) and not (never_retry_on and isinstance(exc, never_retry_on)):
            raise TransientJobError(f"Celery task {task.name} failed with {exc!r} (in its autoretry_for)") from exc
        raise
