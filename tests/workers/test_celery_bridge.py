"""The celery.task bridge: a team's registered Celery task runs as a job through the real
authority (claim, lease, stage, complete); its return value is the JSON result; the tenant's
allowlist of task names is enforced at schedule create, edit and manual run (403)."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from objectstore import get_object_store
from runs import authority
from runs.models import Attempt, PendingReason, Run, RunState
from schedules.models import Tenant
from tests.factories import api_client, make_tenant
from tests.workers import bridge_tasks  # noqa: F401  (registers the tasks with the Celery app)
from workers.intake import claim_and_execute

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]

TASKS = ["tests.bridge.add", "tests.bridge.with_context", "tests.bridge.not_json", "tests.bridge.flaky",
         "tests.bridge.autoretry", "tests.bridge.gone"]


@pytest.fixture
def team():
    return make_tenant("team", celery_tasks=TASKS)


def bridged_schedule(client, task: str, **params) -> str:
    body = {"name": task, "jobType": "celery.task", "params": {"task": task, **params},
            "recurrence": {"kind": "cron", "cron": "0 3 * * *", "timezone": "America/New_York"}}
    response = client.post("/api/v1/schedules", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["scheduleId"]


def run_now(tenant, task: str, **params) -> Run:
    """One manual occurrence of a bridged schedule, claimed and executed by the worker runtime."""
    schedule_id = bridged_schedule(api_client(tenant), task, **params)
    run, _ = authority.run_once(tenant=tenant, schedule_id=schedule_id)
    [outcome] = claim_and_execute(resource_classes=["short"], worker_label="w")
    assert outcome.run_id == run.id
    return Run.objects.get(id=run.id)


def result_bytes(run: Run) -> bytes:
    return get_object_store().get(run.result_key, run.result_version_id)


def test_bridge__the_task_return_value_is_the_json_result(team):
    run = run_now(team, "tests.bridge.add", args=[2, 3], kwargs={"scale": 10})
    assert run.state == RunState.SUCCEEDED
    assert run.result_content_type == "application/json"
    assert json.loads(result_bytes(run)) == {"sum": 50}


def test_bridge__a_task_taking_scheduler_context_gets_the_job_context(team):
    run = run_now(team, "tests.bridge.with_context", args=["nightly"])
    assert run.state == RunState.SUCCEEDED
    assert json.loads(result_bytes(run)) == {"label": "nightly", "runId": run.id, "task": "tests.bridge.with_context"}


def test_bridge__an_unregistered_task_fails_the_run_permanently(team):
    run = run_now(team, "tests.bridge.gone")
    assert run.state == RunState.FAILED
    [attempt] = Attempt.objects.filter(run=run)
    assert "tests.bridge.gone is not registered" in attempt.error


def test_bridge__a_return_value_that_is_not_json_fails_permanently(team):
    run = run_now(team, "tests.bridge.not_json")
    assert run.state == RunState.FAILED and "not JSON" in run.attempts.get().error


@pytest.mark.parametrize("task", ["tests.bridge.flaky", "tests.bridge.autoretry"])
def test_bridge__self_retry_and_autoretry_for_are_retried_with_backoff(team, task):
    run = run_now(team, task)
    assert (run.state, run.pending_reason) == (RunState.PENDING, PendingReason.RETRY)
    assert run.attempts.get().state == "failed"


def test_bridge__a_task_taken_off_the_allowlist_since_is_refused_at_run_time(team):
    client = api_client(team)
    schedule_id = bridged_schedule(client, "tests.bridge.add", args=[1, 1])
    run, _ = authority.run_once(tenant=team, schedule_id=schedule_id)
    Tenant.objects.filter(id=team.id).update(celery_tasks=[])
    claim_and_execute(resource_classes=["short"], worker_label="w")
    run.refresh_from_db()
    assert run.state == RunState.FAILED and "allowlist" in run.attempts.get().error


def assert_task_forbidden(response, task):
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "job_type_forbidden" and error["details"]["task"] == task


def test_allowlist__schedule_create_edit_and_manual_run_refuse_other_tasks(team):
    client = api_client(team)
    body = {"name": "x", "jobType": "celery.task", "params": {"task": "billing.tasks.secret"},
            "recurrence": {"kind": "cron", "cron": "0 3 * * *"}}
    assert_task_forbidden(client.post("/api/v1/schedules", body, format="json"), "billing.tasks.secret")

    schedule_id = bridged_schedule(client, "tests.bridge.add", args=[1, 2])
    edit = {"expectedRevision": 1, "params": {"task": "billing.tasks.secret"}}
    assert_task_forbidden(client.patch(f"/api/v1/schedules/{schedule_id}", edit, format="json"),
                          "billing.tasks.secret")
    manual = client.post(f"/api/v1/schedules/{schedule_id}/runs", {"params": {"task": "billing.tasks.secret"}},
                         format="json")
    assert_task_forbidden(manual, "billing.tasks.secret")
    assert not Run.objects.filter(schedule_id=schedule_id).exists()
    assert client.post(f"/api/v1/schedules/{schedule_id}/runs", {}, format="json").status_code == 201


def test_allowlist__a_tenant_without_one_may_run_no_task(db):
    client = api_client(make_tenant("plain"))
    body = {"name": "x", "jobType": "celery.task", "params": {"task": "tests.bridge.add"},
            "recurrence": {"kind": "cron", "cron": "0 3 * * *"}}
    assert_task_forbidden(client.post("/api/v1/schedules", body, format="json"), "tests.bridge.add")


def test_params__a_task_name_is_required_and_kwargs_may_not_name_the_context(team):
    client = api_client(team)
    for params, field in (({}, "params"), ({"task": "tests.bridge.add", "kwargs": {"scheduler_context": 1}},
                                          "params.kwargs")):
        body = {"name": "x", "jobType": "celery.task", "params": params,
                "recurrence": {"kind": "cron", "cron": "0 3 * * *"}}
        response = client.post("/api/v1/schedules", body, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["error"]["details"]["field"] == field


def test_create_tenant__celery_tasks_option_sets_the_allowlist(db):
    call_command("create_tenant", "billing", "--celery-tasks", "b.tasks.export, a.tasks.sync,b.tasks.export",
                 stdout=io.StringIO())
    assert Tenant.objects.get(name="billing").celery_tasks == ["a.tasks.sync", "b.tasks.export"]
    with pytest.raises(CommandError, match="not a Celery task name"):
        call_command("create_tenant", "other", "--celery-tasks", "bad name", stdout=io.StringIO())
