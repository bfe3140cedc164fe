"""A team's job module outside any installed app, as SCHEDULER_JOB_MODULES names one
(tests/workers/test_job_api.py discovers, syncs and runs it)."""

from workers.jobs import JobContext, JobOutput, PermanentJobError, scheduler_job

INVOICE_EXPORT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"month": {"type": "string", "pattern": r"^\d{4}-\d{2}$"}},
    "required": ["month"],
}


@scheduler_job(
    "fixture.invoice_export",
    resource_class="long",
    lease_seconds=60,
    timeout_seconds=1800,
    max_attempts=3,
    params_schema=INVOICE_EXPORT_SCHEMA,
    uncertain_effect_policy="hold",
)
def invoice_export(ctx: JobContext) -> JobOutput:
    month = ctx.params.get("month")
    if not month:
        raise PermanentJobError("month is required")
    ctx.checkpoint()
    rows = f"month,run,scheduled_at\n{month},{ctx.run_id},{ctx.scheduled_at.isoformat()}\n"
    return JobOutput(rows.encode(), "text/csv", f"invoices-{month}.csv")
