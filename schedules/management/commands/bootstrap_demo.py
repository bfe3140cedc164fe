"""Create the demo tenant and its weekday sales-report schedule if absent; print URL and token."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand

from runs.authority import run_once
from schedules.models import Schedule, Tenant
from schedules.services import schedule_create
from schedules.tenants import tenant_create, tenant_token_create
from scheduler_project.http.schedule_requests import request_hash, schedule_spec

DEMO_SCHEDULE = {
    "name": "sales-report",
    "jobType": "report.sales",
    "params": {"region": "us"},
    "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
    "effects": {"email": {"to": ["sales@example.com"]}},
}


class Command(BaseCommand):
    help = "Create the demo tenant and schedule (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000")

    def handle(self, *args, url, **options):
        token_file = settings.VAR_DIR / "demo-token"
        tenant = Tenant.objects.filter(name="demo").first()
        if tenant is None:
            tenant, secret = tenant_create(name="demo")
        elif not token_file.exists():
            _, secret = tenant_token_create(tenant=tenant, name="demo")
        if not token_file.exists():
            token_file.parent.mkdir(parents=True, exist_ok=True)
            token_file.write_text(secret)
        secret = token_file.read_text().strip()
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
        self.stdout.write(f"API:    {url}/api/v1/   docs: {url}/api/docs/   admin: {url}/admin/")
        self.stdout.write(f"Demo schedule {schedule.id} next run at {schedule.next_run_at:%Y-%m-%dT%H:%M:%SZ}")
        self.stdout.write(json.dumps({"tenantId": tenant.id, "token": secret, "scheduleId": schedule.id}))
