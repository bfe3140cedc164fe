"""The public job API: what a team imports to declare its own jobs (README, "Add your first job").

    from workers.jobs import JobContext, JobOutput, scheduler_job

    @scheduler_job("billing.invoice_export", resource_class="long", timeout_seconds=1800,
                   params_schema={"type": "object", "properties": {"month": {"type": "string"}}})
    def invoice_export(ctx: JobContext) -> JobOutput: ...

The fence in the job's hands (workers.jobs.fencing): ``fenced_update`` and
``fenced_update_or_create`` on a table with the ``FencedRow`` columns, ``fenced_put`` and
``fenced_get`` on an S3 bucket; a stale attempt's write raises ``StaleAttempt``.

The context a job receives (``JobContext``: params, scheduled instant in UTC and local time,
tenant, attempt, checkpoint, sleep, logger, progress, output) is documented in
workers.jobs.framework, the ways to return an output in workers.jobs.output.
The framework is workers.jobs.framework, the built-in jobs workers.jobs.builtin, discovery
workers.jobs.discovery and the catalog sync workers.jobs.catalog.
"""

from workers.jobs.fencing import (
    FencedRow,
    StaleAttempt,
    fenced_get,
    fenced_put,
    fenced_update,
    fenced_update_or_create,
)
from workers.jobs.framework import JobContext, JobOutput, PermanentJobError, TransientJobError, scheduler_job

__all__ = [
    "FencedRow",
    "JobContext",
    "JobOutput",
    "PermanentJobError",
    "StaleAttempt",
    "TransientJobError",
    "fenced_get",
    "fenced_put",
    "fenced_update",
    "fenced_update_or_create",
    "scheduler_job",
]
