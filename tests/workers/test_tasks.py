"""The hint task as Flower and `celery events` see it: its return value says what it did,
and a failed job is a failed task."""

import pytest

from runs import authority
from runs.models import Run
from tests.authority_steps import create_schedule
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
    assert report["hintedRunId"] == run.id and report["claimedRunId"] == run.id
    assert report["jobType"] == "demo.sleep" and report["outcome"] == "succeeded"
    assert report["attemptId"].startswith("att_") and report["durationSeconds"] >= 0
    assert Run.objects.get(id=run.id).state == "succeeded"


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
    assert result.get() == {"hintedRunId": "run_gone", "claimedRunId": None, "jobType": None, "outcome": "dropped"}
