import json

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import DomainError
from schedules.models import DEFAULT_MAX_STORED_BYTES
from schedules.tenants import tenant_create
from workers.jobs.framework import builtin_job_types


class Command(BaseCommand):
    help = 'Create a tenant and its API token; the last line of output is {"tenantId", "token"}.'

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--job-types", default=None,
                            help="comma-separated; default: every built-in job type (examples and a team's own job "
                                 "types only when named)")
        parser.add_argument("--max-schedules", type=int, default=1000)
        parser.add_argument("--max-active-runs", type=int, default=100)
        parser.add_argument("--max-emails-per-day", type=int, default=1000,
                            help="email recipients per UTC day over all the tenant's email effects")
        parser.add_argument("--max-pending-manual-runs", type=int, default=1000,
                            help="manual and backfilled runs waiting to be claimed: pending or queued")
        parser.add_argument("--max-stored-bytes", type=int, default=DEFAULT_MAX_STORED_BYTES,
                            help="bytes the tenant's results may hold in the object store (default 10 GiB)")
        parser.add_argument("--weight", type=int, default=1)
        parser.add_argument("--celery-tasks", default="",
                            help="comma-separated Celery task names the tenant may run through celery.task")

    def handle(self, *args, **options):
        if options["job_types"] is None:
            job_types = builtin_job_types()
        else:
            job_types = [name.strip() for name in options["job_types"].split(",") if name.strip()]
        try:
            tenant, secret = tenant_create(
                name=options["name"],
                job_types=job_types,
                max_schedules=options["max_schedules"],
                max_active_runs=options["max_active_runs"],
                max_emails_per_day=options["max_emails_per_day"],
                max_pending_manual_runs=options["max_pending_manual_runs"],
                max_stored_bytes=options["max_stored_bytes"],
                weight=options["weight"],
                celery_tasks=[name.strip() for name in options["celery_tasks"].split(",") if name.strip()],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(json.dumps({"tenantId": tenant.id, "token": secret}))
