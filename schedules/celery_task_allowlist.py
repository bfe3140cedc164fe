"""The Celery task bridge's rule on this side: which Celery tasks a tenant may run.

The built-in job type ``celery.task`` (workers.jobs.celery_bridge) runs any registered Celery
task named by its ``task`` param, so the job type alone grants too much: a tenant may name
only the tasks on its allowlist (``Tenant.celery_tasks``, ``create_tenant --celery-tasks``).
Schedule create and edit and the manual run check it; the worker checks it again at run time.
"""

from __future__ import annotations

import re

from kernel.errors import InvalidRequest, JobTypeForbidden

CELERY_TASK_JOB_TYPE = "celery.task"
MAX_TASK_NAME_LENGTH = 200
# Celery allows any string; dotted Python-like names are what real task names look like.
TASK_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.:-]*$"
_TASK_NAME = re.compile(TASK_NAME_PATTERN)


def task_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a Celery task name on an allowlist; None when it can."""
    if not isinstance(name, str) or not name:
        return "a Celery task name must be a non-empty string"
    if len(name) > MAX_TASK_NAME_LENGTH or not _TASK_NAME.match(name):
        return f"{name[:100]!r} is not a Celery task name (letters, digits, '_', '.', ':', '-')"
    return None


def celery_tasks_normalized(names: list[str]) -> list[str]:
    """The allowlist as stored: each name checked, duplicates dropped, sorted."""
    for name in names:
        problem = task_name_problem(name)
        if problem:
            raise InvalidRequest(problem, field="celeryTasks")
    return sorted(set(names))


def check_celery_task_allowed(tenant, job_type_name: str, params: dict) -> None:
    """403 job_type_forbidden when a ``celery.task`` params name a task off the tenant's allowlist.

    Params were validated against the job type's schema already, so ``task`` is a string."""
    if job_type_name != CELERY_TASK_JOB_TYPE:
        return
    task = params.get("task")
    if task not in (tenant.celery_tasks or []):
        raise JobTypeForbidden(
            f"this tenant may not run the Celery task {str(task)[:100]!r} through {CELERY_TASK_JOB_TYPE}",
            details={"task": task, "allowedTasks": sorted(tenant.celery_tasks or [])},
        )
