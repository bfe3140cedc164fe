"""The hint task as Flower and `celery events` see it: its return value says what it did,
and a failed job is a failed task."""

import threading
import time

import pytest

from runs import authority
from runs.models import Run
from scheduler_project.celery import app
from tests.authority_steps import create_schedule
from tests.servers import RedisServer, broker
from workers import batching
from workers.tasks import JobFailed, execute

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]


def _queued(tenant, **params) -> Run:
    schedule = create_schedule(tenant, params={"seconds": 0, **params})
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    return run


def test_execute__returns_the_run_it_claimed_its_job_type_and_outcome(tenant):
    run = _queued(tenant)
    result = execute.apply(args=[run.id, "short"])
    assert result.successful()
    report = result.get()
    assert report["hintedRunId"] == run.id and report["outcome"] == "executed"
    [done] = report["runs"]
    assert done["runId"] == run.id and done["jobType"] == "demo.sleep" and done["outcome"] == "succeeded"
    assert done["attemptId"].startswith("att_") and done["durationSeconds"] >= 0
    assert Run.objects.get(id=run.id).state == "succeeded"


def test_execute__a_hint_worth_several_claims__claims_what_this_process_takes_and_passes_on_the_rest(
    tenant, settings
):
    """A fresh process claims one run per hint, so a hint worth three executes one and
    passes a hint worth two on; the process's claim size then grows (workers.batching)."""
    runs = [_queued(tenant) for _ in range(3)]
    batching._windows.clear(), batching._per_job.clear()
    result = execute.apply(args=[runs[0].id, "short", 3])
    report = result.get()
    assert len(report["runs"]) == 1 and report["worth"] == 3 and report["passedOn"] == 2
    assert batching.claim_size("short", 2) == 2
    report = execute.apply(args=[runs[0].id, "short", 2]).get()
    assert len(report["runs"]) == 2 and report["passedOn"] == 0
    assert set(Run.objects.filter(id__in=[r.id for r in runs]).values_list("state", flat=True)) == {"succeeded"}


def test_execute__passes_the_rest_of_a_hint_on_before_executing_what_it_claimed(tenant):
    """While the first claimed run still runs, the hint for the rest is already in the queue,
    for another free process: a hint worth 16 of 0.3 s jobs is not a 4.8 s chain."""
    runs = [_queued(tenant, seconds=1) for _ in range(2)]
    batching._windows.clear(), batching._per_job.clear()  # a fresh process claims one run per hint
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        channel.queue_purge("short")
        thread = threading.Thread(target=lambda: execute.apply(args=[runs[0].id, "short", 2]))
        thread.start()
        try:
            while Run.objects.filter(id__in=[r.id for r in runs], state="running").count() == 0:
                time.sleep(0.02)
            [running] = Run.objects.filter(id__in=[r.id for r in runs], state="running")
            deadline = time.monotonic() + 0.5  # the claim has committed; the hint follows it at once
            while (queued_hints := channel._size("short")) == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            still_running = Run.objects.get(id=running.id).state == "running"  # a 1 s job
        finally:
            thread.join()
        channel.queue_purge("short")
    assert (queued_hints, still_running) == (1, True)
    assert Run.objects.get(id=running.id).state == "succeeded"


def test_execute__a_failed_job_is_a_failed_task(tenant):
    run = _queued(tenant, fail="permanent")
    result = execute.apply(args=[run.id, "short"])
    assert result.failed()
    assert isinstance(result.result, JobFailed)
    assert run.id in str(result.result) and "demo.sleep" in str(result.result)
    assert Run.objects.get(id=run.id).state == "failed"


def test_execute__a_hint_with_nothing_claimable_is_dropped(tenant):
    result = execute.apply(args=["run_gone", "short"])
    assert result.successful()
    assert result.get() == {"hintedRunId": "run_gone", "worth": 1, "passedOn": 0, "outcome": "dropped", "runs": []}


def test_execute__broker_down_when_passing_the_hint_on__the_claimed_run_still_executes(tenant, tmp_path):
    """A hint task that cannot pass the rest of its hint on (the broker restarting) must not
    abandon the run it claimed until its lease passes: it executes it, and the rest keep their
    outbox rows for the relay."""
    runs = [_queued(tenant) for _ in range(2)]
    batching._windows.clear(), batching._per_job.clear()
    server = RedisServer(tmp_path / "redis.log")
    server.start()
    try:
        with broker(server.url):
            server.kill()
            report = execute.apply(args=[runs[0].id, "short", 2]).get()
    finally:
        server.kill()
    assert report["passedOn"] == 0 and [r["outcome"] for r in report["runs"]] == ["succeeded"]
    states = sorted(Run.objects.filter(id__in=[r.id for r in runs]).values_list("state", flat=True))
    assert states == ["queued", "succeeded"]
