"""A Celery worker and the relay are back on a restarted Redis within a second, not after
Celery's and kombu's 2 s, 4 s, ... reconnection backoff (workers/consumer.py, the
interval_* transport options). A real worker process, a private redis-server restarted
by the test, and the relay step this process runs."""

import time

import pytest
import redis

from runs.authority import run_once
from scheduler_project.celery import app
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.services import schedule_create
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until
from tests.runs.test_relay_broker_restart import broker
from workers.dispatch import EXECUTE_TASK, republish_and_relay

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOWN_SECONDS = 2.5  # Celery's own backoff would try at 2 s (still down), then at 6 s



def test_worker_and_relay__back_on_a_restarted_broker_within_a_second(processes, private_redis, tenant, settings):
    settings.CLAIM_BATCH = {}
    processes.env.update(DATABASE_URL=database_url_of_test_db(), REDIS_URL=private_redis.url)
    processes.celery_worker("worker", "short", concurrency=1)
    client = redis.Redis.from_url(private_redis.url)
    wait_until(lambda: "ready" in processes.log("worker"), timeout=60, message="the worker to start")
    with broker(private_redis.url):
        app.send_task(EXECUTE_TASK, args=["run_gone", "short", 1], queue="short", ignore_result=True)
        wait_until(lambda: client.llen("short") == 0, timeout=10, message="the worker to take a hint")
        republish_and_relay()  # the relay has seen this incarnation

        private_redis.kill()
        schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
        run, _ = run_once(tenant=tenant, schedule_id=schedule.id)
        time.sleep(DOWN_SECONDS)
        private_redis.start()
        back = time.monotonic()
        assert republish_and_relay() == 1  # waited for the broker, then published
        relayed = time.monotonic() - back
        wait_until(lambda: run.__class__.objects.get(id=run.id).state == "succeeded", timeout=15, interval=0.05,
                   message="the worker to run the hinted run")
        executed = time.monotonic() - back
    assert relayed < 1.2 and executed < 1.8, (relayed, executed)
