"""A job type whose declaration is gone (a start without the job modules of an earlier one):
the catalog disables it, its schedules say so, its waiting runs say why they wait, and no
new work of it is accepted until it is declared again."""

import io

import pytest

from runs.models import Run
from tests.api.conftest import assert_error, create_schedule, run_once
from workers.jobs.catalog import job_types_sync
from workers.jobs.framework import declared_jobs
from workers.management.commands.serve import Command as Serve

pytestmark = pytest.mark.usefixtures("file_objects")


def declare_all_but(name: str) -> None:
    changes = job_types_sync({n: d for n, d in declared_jobs().items() if n != name})
    assert [(c.name, c.kind) for c in changes] == [(name, "disabled")]


@pytest.fixture
def orphaned(client):
    """A demo.sleep schedule with a queued run once and a pending one, then demo.sleep undeclared."""
    schedule = create_schedule(client, name="nightly", overlapPolicy="allow")
    queued = run_once(client, schedule["scheduleId"])
    pending = run_once(client, schedule["scheduleId"], {"runAt": "2999-01-01T00:00:00Z"})
    declare_all_but("demo.sleep")
    return schedule["scheduleId"], queued["runId"], pending["runId"]


def test_the_schedule_shows_its_job_type_unavailable_and_keeps_its_rule(client, orphaned):
    schedule_id, _, _ = orphaned
    body = client.get(f"/api/v1/schedules/{schedule_id}").json()
    assert body["jobTypeAvailable"] is False and body["nextRunAt"] is not None
    listed = client.get("/api/v1/schedules").json()["results"]
    assert [s["jobTypeAvailable"] for s in listed] == [False]


def test_waiting_runs_show_why_they_wait(client, orphaned):
    schedule_id, queued, pending = orphaned
    for run_id in (queued, pending):
        assert client.get(f"/api/v1/runs/{run_id}").json()["pendingReason"] == "job_type_unavailable"
    for page in (f"/api/v1/schedules/{schedule_id}/runs", "/api/v1/runs"):
        reasons = {r["runId"]: r["pendingReason"] for r in client.get(page).json()["results"]}
        assert reasons == {queued: "job_type_unavailable", pending: "job_type_unavailable"}


def test_run_once_and_backfill_are_refused_and_create_nothing(client, orphaned):
    schedule_id, _, _ = orphaned
    error = assert_error(client.post(f"/api/v1/schedules/{schedule_id}/runs"), 409, "job_type_unavailable")
    assert error["details"] == {"jobType": "demo.sleep"}
    backfill = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"}
    assert_error(client.post(f"/api/v1/schedules/{schedule_id}/backfill", backfill), 409, "job_type_unavailable")
    assert Run.objects.count() == 2


def test_a_replay_of_a_run_once_accepted_before__still_answers_its_run(client):
    schedule = create_schedule(client, name="nightly")["scheduleId"]
    accepted = run_once(client, schedule, HTTP_IDEMPOTENCY_KEY="k1")
    declare_all_but("demo.sleep")
    replay = client.post(f"/api/v1/schedules/{schedule}/runs", {}, HTTP_IDEMPOTENCY_KEY="k1")
    assert replay.status_code == 200 and replay.json()["runId"] == accepted["runId"]


def test_declared_again__everything_as_before(client, orphaned):
    schedule_id, queued, pending = orphaned
    assert [c.kind for c in job_types_sync()] == ["changed"]
    assert client.get(f"/api/v1/schedules/{schedule_id}").json()["jobTypeAvailable"] is True
    assert client.get(f"/api/v1/runs/{queued}").json()["pendingReason"] is None
    assert client.get(f"/api/v1/runs/{pending}").json()["pendingReason"] == "not_due"
    run_once(client, schedule_id)


def test_serve_names_the_schedules_at_start(orphaned, tenant):
    schedule_id, _, _ = orphaned
    serve = Serve(stdout=io.StringIO(), stderr=io.StringIO())
    serve._warn_schedules_without_job_type()
    said = serve.stderr._out.getvalue()
    assert "WARNING: 1 schedule(s) have a job type that is no longer declared" in said
    assert f"{tenant.id} {schedule_id} 'nightly': job type demo.sleep" in said


def test_serve_says_nothing_when_every_job_type_is_declared(client):
    create_schedule(client)
    serve = Serve(stdout=io.StringIO(), stderr=io.StringIO())
    serve._warn_schedules_without_job_type()
    assert serve.stderr._out.getvalue() == ""


def test_admin_and_console_schedule_pages_say_so(admin_client, orphaned):
    schedule_id, queued, _ = orphaned
    page = admin_client.get(f"/admin/schedules/schedule/{schedule_id}/change/").content.decode()
    assert "no: the job type is no longer declared" in page
    page = admin_client.get(f"/console/schedules/{schedule_id}/").content.decode()
    assert 'id="job-type-unavailable"' in page
    page = admin_client.get(f"/console/runs/{queued}/").content.decode()
    assert "(job_type_unavailable)" in page
