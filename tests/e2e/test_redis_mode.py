"""Redis mode with real processes: scanner, relay, sweeper and Celery workers as subprocesses,
PostgreSQL, Redis, and a moto S3 server. Nothing is mocked."""

import hashlib
import signal
import urllib.request
from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs.models import Attempt, AttemptState, Outbox, Run, RunState
from schedules.models import Schedule
from tests.child_env import redis_mode
from tests.e2e.processes import wait_until
from tests.factories import api_client, make_tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def system(processes, redis_url, moto_server, settings):
    """Environment shared by this process and its children: one database, broker, bucket."""
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="e2e"):
        yield processes


def create_schedule(client, **body):
    response = client.post("/api/v1/schedules", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["scheduleId"]


def make_due_now(schedule_id):
    Schedule.objects.filter(id=schedule_id).update(next_run_at=authority_now() - timedelta(seconds=1))


def test_redis_mode__due_schedule_runs_end_to_end_with_s3_result(system):
    tenant = make_tenant("acme")
    client = api_client(tenant)
    schedule_id = create_schedule(
        client, name="sales", jobType="report.sales", params={"region": "eu"},
        recurrence={"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
    )
    make_due_now(schedule_id)
    system.manage("scan", "scan")
    system.manage("relay", "relay")
    system.manage("sweep", "sweep")
    system.celery_worker("worker", "short", concurrency=2)

    run = wait_until(
        lambda: Run.objects.filter(schedule_id=schedule_id, state=RunState.SUCCEEDED).first(),
        timeout=60, message="the scheduled run to succeed",
    )
    body = client.get(f"/api/v1/runs/{run.id}").json()
    assert body["state"] == "succeeded" and body["attempt"] == 1
    assert body["result"]["checksum"] == run.result_checksum
    assert Outbox.objects.filter(action_key=f"dispatch-{run.id}", published_at__isnull=False).exists()

    link = client.get(f"/api/v1/runs/{run.id}/result").json()
    with urllib.request.urlopen(link["url"], timeout=10) as response:
        data = response.read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == run.result_checksum == link["checksum"]
    assert data[:2] == b"PK"  # the sales report is a ZIP of CSV + HTML


def test_redis_mode__duplicated_hint_runs_the_occurrence_once(system):
    from scheduler_project.celery import app
    from workers.hint_publisher import publish_hints

    tenant = make_tenant("acme")
    client = api_client(tenant)
    schedule_id = create_schedule(
        client, name="s", jobType="demo.sleep", params={"seconds": 0.5},
        recurrence={"kind": "cron", "cron": "0 9 * * *"},
    )
    run_id = client.post(f"/api/v1/schedules/{schedule_id}/runs", {}, format="json").json()["runId"]
    row = Outbox.objects.get(run_id=run_id)
    with app.producer_or_acquire() as producer:
        for _ in range(3):  # a relay that published, died before marking, and was retried
            publish_hints([row], producer)
    system.celery_worker("worker", "short", concurrency=3)
    wait_until(lambda: Run.objects.get(id=run_id).state == RunState.SUCCEEDED, timeout=60,
               message="the run to succeed")
    wait_until(lambda: not _queue_length(system, "short"), timeout=30, message="all hints consumed")
    assert Attempt.objects.filter(run_id=run_id).count() == 1


def _queue_length(system, queue):
    import redis

    return redis.Redis.from_url(system.env["REDIS_URL"]).llen(queue)


def test_redis_mode__worker_killed_mid_job_is_recovered_by_sweeper(system):
    tenant = make_tenant("acme")
    client = api_client(tenant)
    schedule_id = create_schedule(
        client, name="slow", jobType="demo.sleep", params={"seconds": 4},
        recurrence={"kind": "cron", "cron": "0 9 * * *"},
    )
    from schedules.models import JobType

    JobType.objects.filter(name="demo.sleep").update(default_lease_seconds=3)
    run_id = client.post(f"/api/v1/schedules/{schedule_id}/runs", {}, format="json").json()["runId"]
    system.manage("relay", "relay")
    system.manage("sweep", "sweep")
    system.celery_worker("worker", "short", concurrency=1)
    wait_until(lambda: Run.objects.get(id=run_id).state == RunState.RUNNING, timeout=30,
               message="the first attempt to start")
    system.signal("worker", signal.SIGKILL)
    system.children.pop("worker").wait()

    first = Attempt.objects.get(run_id=run_id, number=1)
    wait_until(lambda: Attempt.objects.get(id=first.id).state == AttemptState.EXPIRED, timeout=30,
               message="the sweeper to expire the dead worker's lease")
    system.celery_worker("worker-2", "short", concurrency=1)
    run = wait_until(
        lambda: Run.objects.filter(id=run_id, state=RunState.SUCCEEDED).first(), timeout=60,
        message="a new attempt to finish the run",
    )
    assert run.fence == 2 and run.accepted_attempt.number == 2
    assert run.accepted_attempt.fence == 2


def test_redis_mode__small_tenant_starts_before_big_backlog_drains(system):
    big, small = make_tenant("big"), make_tenant("small")
    big_schedule = create_schedule(api_client(big), name="b", jobType="demo.sleep", params={"seconds": 0.05},
                                   recurrence={"kind": "cron", "cron": "0 9 * * *"}, overlapPolicy="allow")
    small_schedule = create_schedule(api_client(small), name="s", jobType="demo.sleep", params={"seconds": 0.05},
                                     recurrence={"kind": "cron", "cron": "0 9 * * *"}, overlapPolicy="allow")
    for i in range(500):
        api_client(big).post(f"/api/v1/schedules/{big_schedule}/runs", {}, format="json")
    small_runs = [
        api_client(small).post(f"/api/v1/schedules/{small_schedule}/runs", {}, format="json").json()["runId"]
        for _ in range(5)
    ]
    system.manage("relay", "relay")
    system.celery_worker("worker", "short", concurrency=2)
    wait_until(lambda: Run.objects.filter(id__in=small_runs, state=RunState.SUCCEEDED).count() == 5,
               timeout=120, message="the small tenant's runs to finish")
    big_left = Run.objects.filter(schedule_id=big_schedule).exclude(state=RunState.SUCCEEDED).count()
    print(f"small tenant done while the big tenant still had {big_left} of 500 runs not finished")
    assert big_left > 100
