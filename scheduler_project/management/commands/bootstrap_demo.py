"""Create the demo tenant and its weekday sales-report schedule if absent, grant it every job
type; print URL and token."""

import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from runs.authority import run_once
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import request_hash, schedule_spec
from schedules.models import ApiToken, JobType, Schedule, Tenant, TokenKind
from schedules.tenants import tenant_create, tenant_token_create

DEMO_SCHEDULE = {
    "name": "sales-report",
    "jobType": "report.sales",
    "params": {"region": "us"},
    "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
    "effects": {"email": {"to": ["sales@example.com"]}},
}


class Command(BaseCommand):
    help = "Create the demo tenant and schedule, and a working token in var/demo-token (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--url", default=settings.PUBLIC_BASE_URL)

    def handle(self, *args, url, **options):
        token_file = settings.VAR_DIR / "demo-token"
        tenant = Tenant.objects.filter(name="demo").first()
        if tenant is None:
            tenant, secret = tenant_create(name="demo")
            _write_token(token_file, secret)
        elif not _token_works(token_file, tenant):
            # The file is missing, or left by another database (make run and compose share var/).
            _, secret = tenant_token_create(tenant=tenant, name="demo")
            _write_token(token_file, secret)
        secret = token_file.read_text().strip()
        # The demo tenant may use every job type, also those declared since it was created
        # (README, "Add your first job": make run syncs a new job, then grants it here).
        tenant.allowed_job_types.add(*JobType.objects.filter(enabled=True))
        schedule = Schedule.objects.filter(tenant=tenant, name="sales-report", deleted_at__isnull=True).first()
        if schedule is None:
            schedule, _ = schedule_create(
                tenant=tenant,
                spec=schedule_spec(DEMO_SCHEDULE),
                idempotency_key="demo-bootstrap",
                request_hash=request_hash(DEMO_SCHEDULE),
            )
            # One run now, so a new user sees a real report without waiting for 09:00.
            run_once(
                tenant=tenant, schedule_id=schedule.id, idempotency_key="demo-first-run", request_hash=request_hash({})
            )
        url = url.rstrip("/")
        self.stdout.write(f"API:    {url}/api/v1/   docs: {url}/api/docs/   admin: {url}/admin/")
        self.stdout.write(f"Demo schedule {schedule.id} next run at {schedule.next_run_at:%Y-%m-%dT%H:%M:%SZ}")
        self.stdout.write(json.dumps({"tenantId": tenant.id, "token": secret, "scheduleId": schedule.id}))


def _token_works(token_file: Path, tenant: Tenant) -> bool:
    if not token_file.exists():
        return False
    token_hash = ApiToken.hash_secret(token_file.read_text().strip())
    return ApiToken.objects.filter(
        kind=TokenKind.TENANT, tenant=tenant, token_hash=token_hash, revoked_at__isnull=True
    ).exists()


def _write_token(token_file: Path, secret: str) -> None:
    # Replace rather than rewrite: a file left by a container's root user is still replaceable.
    token_file.parent.mkdir(parents=True, exist_ok=True)
    temp = token_file.with_name(f".{token_file.name}.{os.getpid()}")
    temp.write_text(secret)
    os.replace(temp, token_file)
