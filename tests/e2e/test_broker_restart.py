"""A Celery worker and the relay are back on a restarted Redis within a second, not after
Celery's and kombu's 2 s, 4 s, ... reconnection backoff (workers/consumer.py, the
interval_* transport options), and a worker that loses the broker while a task runs lives
on. A real worker process, a private redis-server restarted by the test, and the relay step
this process runs."""

import time

import pytest
import redis

from runs.authority import run_once
from schedule_services.lifecycle import schedule_create
from scheduler_project.celery import app
from scheduler_project.http.schedule_requests import schedule_spec
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until
from tests.runs.test_relay_broker_restart import broker
from workers.hint_publisher import EXECUTE_TASK, republish_and_relay

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOWN_SECONDS = 2.5  # Celery's own backoff would try at 2 s (still down), then at 6 s



def test_worker_and_relay__back_on_a_restarted_broker_within_a_second(processes, private_redis, tenant, settings):
    settings.CLAIM_BATCH = {}
    # Idle claims off: the worker would claim the run from the database while the broker is down.
    processes.env.update(DATABASE_URL=database_url_of_test_db(), REDIS_URL=private_redis.url, IDLE_CLAIM_SECONDS="0")
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


def test_worker__broker_killed_while_a_task_runs__survives_and_executes_hints_after(
    processes, private_redis, tenant, settings
):
    """The broker dies while a hint task runs (its message unacknowledged, the consumer
    waiting in BRPOP for the free slot): Celery's connection-loss cleanup closed the channel
    twice and the second close, against a collected transport, raised AttributeError
    ('NoneType' object has no attribute 'hostname') and killed the worker
    (workers/consumer.py). It must reconnect, finish the running job and take hints again."""
    settings.CLAIM_BATCH = {}
    # Idle claims off: only the hint can execute the second run, so it proves the reconnect.
    processes.env.update(DATABASE_URL=database_url_of_test_db(), REDIS_URL=private_redis.url, IDLE_CLAIM_SECONDS="0")
    processes.celery_worker("worker", "short", concurrency=2)
    wait_until(lambda: "ready" in processes.log("worker"), timeout=60, message="the worker to start")
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": 2}, "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    running, _ = run_once(tenant=tenant, schedule_id=schedule.id)
    Run = running.__class__
    with broker(private_redis.url):
        app.send_task(EXECUTE_TASK, args=[running.id, "short", 1], queue="short", ignore_result=True)
        wait_until(lambda: Run.objects.get(id=running.id).state == "running", timeout=15, interval=0.05,
                   message="the hinted run to start")
        time.sleep(0.3)  # the consumer is back in BRPOP for its free slot
        private_redis.kill()
        time.sleep(0.5)
        private_redis.start()
        wait_until(lambda: Run.objects.get(id=running.id).state == "succeeded", timeout=15, interval=0.1,
                   message="the running job to finish")
        later, _ = run_once(tenant=tenant, schedule_id=schedule.id, params={"seconds": 0})
        app.send_task(EXECUTE_TASK, args=[later.id, "short", 1], queue="short", ignore_result=True)
        wait_until(lambda: Run.objects.get(id=later.id).state == "succeeded", timeout=15, interval=0.1,
                   message="a hint sent after the restart to be executed")
    log = processes.log("worker")
    assert processes.children["worker"].poll() is None and "Unrecoverable error" not in log, log[-3000:]


def test_relay__broker_down_for_several_steps__lives_on_and_publishes_once_it_is_back(processes, private_redis,
                                                                                      tenant):
    """The relay process used to exit on the first step that found the broker away longer
    than that step's connection retries (only database errors were survived); it now waits
    the outage out and publishes what was committed meanwhile."""
    processes.env.update(DATABASE_URL=database_url_of_test_db(), REDIS_URL=private_redis.url)
    relay = processes.manage("relay", "relay")
    client = redis.Redis.from_url(private_redis.url)
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    run_once(tenant=tenant, schedule_id=schedule.id)
    wait_until(lambda: client.llen("short") == 1, timeout=30, message="the relay to publish the first hint")

    private_redis.kill()
    run, _ = run_once(tenant=tenant, schedule_id=schedule.id)  # committed while the broker is away
    time.sleep(8)  # longer than the connection retries within one step (3 s passed unnoticed)
    assert relay.poll() is None, processes.log("relay")[-3000:]
    private_redis.start()  # empty: no persistence
    client = redis.Redis.from_url(private_redis.url)
    wait_until(lambda: client.llen("short") >= 1, timeout=15, message="the relay to publish on the new broker")
    assert relay.poll() is None
    assert "the broker is unreachable" in processes.log("relay")
    assert run.__class__.objects.get(id=run.id).state == "queued"
