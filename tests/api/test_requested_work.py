"""Requested work (a run once, a backfilled past instant) against the tenant's quota of work
waiting to be claimed, and in the statistics: a run asked for a past instant is late from
when it was created, so no tenant moves the shared figures or the start SLO by asking for
the past."""

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from runs.authority import release_backfill
from runs.models import Run, RunState
from schedules.models import Schedule
from kernel.clock import authority_now
from tests.api.conftest import assert_error, claim, create_schedule, run_once
from tests.authority_steps import REPORT, materialize_one, publish, stage
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.usefixtures("file_objects")

MINUTELY = {"kind": "cron", "cron": "* * * * *"}
DAY = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:10:00Z"}  # ten instants


def backfill(client, schedule_id, body=DAY):
    return client.post(f"/api/v1/schedules/{schedule_id}/backfill", body)


def test_backfill__past_the_quota_is_429_and_creates_nothing(db):
    client = api_client(make_tenant("limited", max_pending_manual_runs=15))
    schedule = create_schedule(client, recurrence=MINUTELY, overlapPolicy="allow")["scheduleId"]
    assert backfill(client, schedule).json()["created"] == 10
    error = assert_error(backfill(client, schedule, {"from": "2026-01-02T00:00:00Z", "to": "2026-01-02T00:10:00Z"}),
                         429, "quota_exceeded")
    assert error["details"] == {"quota": "maxPendingManualRuns", "limit": 15}
    assert Run.objects.filter(schedule_id=schedule).count() == 10
    # What still fits is accepted: five more instants make fifteen.
    assert backfill(client, schedule, {"from": "2026-01-02T00:00:00Z", "to": "2026-01-02T00:05:00Z"}).status_code == 200
    assert Run.objects.filter(schedule_id=schedule).count() == 15


def test_run_once__its_quota_counts_manual_runs_only__a_backfill_counts_both(db):
    """The contract's maxPendingManualRuns limits manual runs waiting; a backfill may not take
    the tenant's requested work (manual and backfilled runs waiting) past it either."""
    client = api_client(make_tenant("limited", max_pending_manual_runs=10))
    schedule = create_schedule(client, recurrence=MINUTELY, overlapPolicy="allow")["scheduleId"]
    assert backfill(client, schedule).json()["created"] == 10
    assert run_once(client, schedule)["state"] == "queued"  # no manual run waits: room for one
    assert_error(backfill(client, schedule, {"from": "2026-01-02T00:00:00Z", "to": "2026-01-02T00:01:00Z"}),
                 429, "quota_exceeded")


def test_backfilled_runs__count_until_claimed__released_or_not(db, worker_client):
    tenant = make_tenant("limited", max_pending_manual_runs=10)
    client, workers = api_client(tenant), worker_client
    schedule = create_schedule(client, recurrence=MINUTELY, overlapPolicy="allow")["scheduleId"]
    assert backfill(client, schedule).json()["created"] == 10
    assert release_backfill() == 10  # queued now, still waiting to be claimed
    one_more = {"from": "2026-01-02T00:00:00Z", "to": "2026-01-02T00:01:00Z"}
    assert_error(backfill(client, schedule, one_more), 429, "quota_exceeded")
    for _ in range(3):
        claim(workers)
    assert backfill(client, schedule, {"from": "2026-01-03T00:00:00Z", "to": "2026-01-03T00:03:00Z"}).json()[
        "created"] == 3  # three claimed: room for three
    assert_error(backfill(client, schedule, one_more), 429, "quota_exceeded")


def test_a_repeated_backfill_creating_nothing_is_accepted_when_full(db):
    client = api_client(make_tenant("limited", max_pending_manual_runs=10))
    schedule = create_schedule(client, recurrence=MINUTELY, overlapPolicy="allow")["scheduleId"]
    assert backfill(client, schedule).json()["created"] == 10
    assert backfill(client, schedule).json() == {"instants": 10, "created": 0, "existing": 10}


def _claim_and_accept(workers, tenant_id) -> Run:
    run = Run.objects.get(id=claim(workers)["runId"])
    assert run.tenant_id == tenant_id
    return publish(run, stage(run, REPORT))


def _due_to_start_sum(tenant_id: str) -> float:
    labels = {"tenant": tenant_id, "resource_class": "short"}
    return REGISTRY.get_sample_value("scheduler_due_to_start_seconds_sum", labels) or 0.0


def test_statistics__a_run_once_at_a_past_instant_and_a_backfill_are_late_from_their_creation(
    client, tenant, worker_client
):
    schedule = create_schedule(client, recurrence=MINUTELY, overlapPolicy="allow")["scheduleId"]
    before = _due_to_start_sum(tenant.id)
    run_once(client, schedule, {"runAt": "2026-01-01T00:00:00Z"})
    _claim_and_accept(worker_client, tenant.id)
    assert backfill(client, schedule, {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:01:00Z"}).json()[
        "created"] == 1
    release_backfill()
    _claim_and_accept(worker_client, tenant.id)
    assert _due_to_start_sum(tenant.id) - before < 60  # not the ~11 months since 2026-01-01
    statistics = client.get(f"/api/v1/schedules/{schedule}/statistics").json()
    assert statistics["samples"] == 2 and statistics["queueDelaySeconds"]["p99"] < 60
    job_type = next(t for t in client.get("/api/v1/job-types").json()["results"] if t["name"] == "demo.sleep")
    assert job_type["statistics"]["queueDelaySeconds"]["p99"] < 60


def test_statistics__the_scanner_s_late_occurrence_stays_late(client, tenant, worker_client):
    """An instant the scanner reached an hour late (it had stopped) is an hour late."""
    schedule = Schedule.objects.get(id=create_schedule(client, recurrence=MINUTELY)["scheduleId"])
    run = materialize_one(schedule)
    hour_ago = authority_now() - timedelta(hours=1)
    Run.objects.filter(id=run.id).update(scheduled_at=hour_ago, due_at=hour_ago)
    before = _due_to_start_sum(tenant.id)
    _claim_and_accept(worker_client, tenant.id)
    assert _due_to_start_sum(tenant.id) - before >= 3600
    statistics = client.get(f"/api/v1/schedules/{schedule.id}/statistics").json()
    assert statistics["queueDelaySeconds"]["p99"] >= 3600


def test_job_types__statistics_are_the_caller_s_own__forecasts_expect_every_tenant_s(
    client, other_client, tenant, other_tenant, worker_client
):
    mine = create_schedule(client)["scheduleId"]
    theirs = Schedule.objects.get(id=create_schedule(other_client)["scheduleId"])
    run_once(client, mine)
    _claim_and_accept(worker_client, tenant.id)
    late = materialize_one(theirs)  # the other tenant's occurrence, claimed a day after its instant
    day_ago = authority_now() - timedelta(days=1)
    Run.objects.filter(id=late.id).update(scheduled_at=day_ago, due_at=day_ago)
    _claim_and_accept(worker_client, other_tenant.id)

    def demo_sleep(api):
        return next(t for t in api.get("/api/v1/job-types").json()["results"] if t["name"] == "demo.sleep")

    own, other = demo_sleep(client)["statistics"], demo_sleep(other_client)["statistics"]
    assert own["samples"] == 1 and own["queueDelaySeconds"]["p99"] < 60
    assert other["samples"] == 1 and other["queueDelaySeconds"]["p99"] >= 86400
    assert own["expectedDurationSeconds"] == other["expectedDurationSeconds"]  # one figure for the shared slots
    assert Run.objects.filter(state=RunState.SUCCEEDED).count() == 2
