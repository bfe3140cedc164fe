"""runs.0032 on attempts that expired before it: each gets expired_at = its finished_at, so
the console's count of the last hour's expired leases (read from expired_at since) keeps
them; an attempt that ended otherwise gets none."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from kernel.clock import authority_now
from runs.models import Attempt
from tests.authority_steps import create_schedule, insert_runs
from tests.runs.test_history_migration import migrate

pytestmark = pytest.mark.django_db(transaction=True)  # the migration runs outside any transaction

BEFORE = ("runs", "0031_run_attempt_pointer_indexes")


def test_attempts_expired_before_the_migration__keep_their_expiry(tenant):
    migrate(BEFORE)
    try:
        schedule = create_schedule(tenant)
        due = "now() - interval '2 hours'" if connection.vendor == "postgresql" else "'now', '-2 hours'"
        insert_runs(3, tenant_id=tenant.id, schedule_ids=[schedule.id], state="failed", due=due, extra="e")
        old = MigrationExecutor(connection).loader.project_state(BEFORE).apps.get_model("runs", "Attempt")
        now = authority_now()
        ended = {"run_e1": ("expired", now - timedelta(minutes=5)), "run_e2": ("expired", now - timedelta(hours=2)),
                 "run_e3": ("failed", now - timedelta(minutes=1))}
        old.objects.bulk_create(
            old(id=f"att_{run_id}", run_id=run_id, number=1, fence=1, state=state, lease_seconds=60,
                started_at=at - timedelta(minutes=1), lease_expires_at=at, finished_at=at)
            for run_id, (state, at) in ended.items())
    finally:
        migrate()

    assert {a.run_id: a.expired_at for a in Attempt.objects.filter(run_id__in=ended)} == {
        "run_e1": ended["run_e1"][1], "run_e2": ended["run_e2"][1], "run_e3": None}
