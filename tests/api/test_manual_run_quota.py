"""Outstanding manual runs (pending or queued) are limited per tenant: past the limit a run
once is 429 quota_exceeded and nothing is created."""

from runs.models import Run
from schedules.models import Schedule
from tests.api.conftest import assert_error, claim, create_schedule, run_once
from tests.authority_steps import materialize_one
from tests.factories import api_client, make_tenant

FUTURE = {"runAt": "2999-01-01T00:00:00Z"}


def test_run_once__past_the_limit_is_429_and_creates_nothing(db):
    client = api_client(make_tenant("limited", max_pending_manual_runs=2))
    first, second = create_schedule(client, name="a"), create_schedule(client, name="b")
    run_once(client, first["scheduleId"], FUTURE)
    run_once(client, second["scheduleId"])  # queued counts as well as pending
    response = client.post(f"/api/v1/schedules/{first['scheduleId']}/runs", FUTURE)
    error = assert_error(response, 429, "quota_exceeded")
    assert error["details"] == {"quota": "maxPendingManualRuns", "limit": 2}
    assert Run.objects.count() == 2


def test_run_once__replay_of_an_accepted_request_still_answers_when_full(db):
    client = api_client(make_tenant("limited", max_pending_manual_runs=1))
    schedule = create_schedule(client)
    accepted = run_once(client, schedule["scheduleId"], FUTURE, HTTP_IDEMPOTENCY_KEY="k1")
    replay = client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs", FUTURE, HTTP_IDEMPOTENCY_KEY="k1")
    assert replay.status_code == 200 and replay.json()["runId"] == accepted["runId"]
    fresh = client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs", FUTURE, HTTP_IDEMPOTENCY_KEY="k2")
    assert_error(fresh, 429, "quota_exceeded")


def test_run_once__claimed_canceled_and_scheduled_runs_do_not_count(db, worker_client):
    tenant = make_tenant("limited", max_pending_manual_runs=1)
    client = api_client(tenant)
    schedule = create_schedule(client, overlapPolicy="allow")
    materialize_one(Schedule.objects.get(id=schedule["scheduleId"]))  # a scheduled occurrence, queued
    canceled = run_once(client, schedule["scheduleId"], FUTURE)
    client.post(f"/api/v1/runs/{canceled['runId']}/cancel")
    run_once(client, schedule["scheduleId"])
    assert_error(client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs"), 429, "quota_exceeded")
    claim(worker_client)
    claim(worker_client)  # both queued runs are now running: nothing waits
    run_once(client, schedule["scheduleId"])
