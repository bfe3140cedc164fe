"""A team's Celery task through the celery.task bridge in Redis mode: a scheduled occurrence
whose hint is delivered twice to two Celery worker processes runs the task once, and its
return value is the published JSON result. Real PostgreSQL, Redis, Celery workers, moto S3."""

import json
from datetime import timedelta

import pytest

from objectstore import get_object_store
from runs import authority
from runs.models import Attempt, Outbox, Run, RunState
from schedules.models import Schedule
from kernel.clock import authority_now
from tests.child_env import redis_mode
from tests.e2e.processes import wait_until
from tests.factories import api_client, make_tenant
from tests.workers import bridge_tasks  # noqa: F401  (the same tasks the workers import)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def system(processes, redis_url, moto_server, settings):
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="bridge"):
        yield processes


def test_bridge__two_hints_for_one_occurrence_run_the_task_once(system, tmp_path):
    from scheduler_project.celery import app
    from workers.hint_publisher import publish_hints

    ledger = tmp_path / "ledger.txt"
    tenant = make_tenant("team", celery_tasks=["tests.bridge.record"])
    body = {"name": "record", "jobType": "celery.task",
            "params": {"task": "tests.bridge.record", "args": [str(ledger), "nightly"]},
            "recurrence": {"kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York"}}
    response = api_client(tenant).post("/api/v1/schedules", body, format="json")
    assert response.status_code == 201, response.content
    schedule_id = response.json()["scheduleId"]
    Schedule.objects.filter(id=schedule_id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert authority.materialize_due().queued == 1  # the scanner: one occurrence, one dispatch intent
    run = Run.objects.get(schedule_id=schedule_id)
    hint = Outbox.objects.get(run_id=run.id)
    with app.producer_or_acquire() as producer:
        publish_hints([hint], producer)
        publish_hints([hint], producer)  # a relay that published, died before marking, and was retried

    for name in ("worker", "worker-2"):  # two processes, each may take one of the hints
        system.celery_worker(name, "short", concurrency=1, SCHEDULER_JOB_MODULES="tests.workers.bridge_tasks")
    wait_until(lambda: Run.objects.get(id=run.id).state == RunState.SUCCEEDED, timeout=60,
               message="the bridged run to succeed")
    wait_until(lambda: _hint_tasks_done(system) == 2, timeout=30, message="both hints handled")

    assert ledger.read_text() == "nightly\n"  # the task body ran once
    assert Attempt.objects.filter(run_id=run.id).count() == 1
    run.refresh_from_db()
    assert run.result_content_type == "application/json"
    data = get_object_store().get(run.result_key, run.result_version_id)
    assert json.loads(data) == {"numbers": [1, 2.5, None], "recorded": "nightly"}


def _hint_tasks_done(system) -> int:
    """Hint tasks the two workers finished (Celery logs each one's return: claimed or dropped)."""
    return sum(system.log(name).count("succeeded in") for name in ("worker", "worker-2"))
