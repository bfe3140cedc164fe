"""A schedule's runtime statistics: GET /api/v1/schedules/{id}/statistics and the admin."""

import pytest

from schedules.models import Schedule
from tests.api.conftest import assert_error, create_schedule
from tests.authority_steps import accepted_history

pytestmark = pytest.mark.usefixtures("file_objects")


@pytest.fixture
def history(client, settings):
    """`mine` with three accepted attempts (1, 2 and 10 s, claimed 0.5 s late), `other` of the
    same job type with one of 100 s; a schedule's own mean counts from three samples on."""
    settings.CAPACITY_SCHEDULE_MIN_SAMPLES = 3
    mine, other = create_schedule(client, name="mine"), create_schedule(client, name="other")
    accepted_history(Schedule.objects.get(id=mine["scheduleId"]), [1, 2, 10], delay=0.5)
    accepted_history(Schedule.objects.get(id=other["scheduleId"]), [100])
    return mine, other


def test_statistics__of_a_schedule_with_enough_history__its_own_mean_is_expected(client, history):
    mine, _ = history
    body = client.get(f"/api/v1/schedules/{mine['scheduleId']}/statistics").json()
    assert body == {
        "scheduleId": mine["scheduleId"], "jobType": "demo.sleep", "windowSeconds": 7 * 86400, "samples": 3,
        "durationSeconds": {"p50": 2.0, "p95": 10.0, "p99": 10.0, "mean": 4.333},
        "queueDelaySeconds": {"p50": 0.5, "p95": 0.5, "p99": 0.5, "mean": 0.5},
        "expectedDurationSeconds": 4.3, "expectedDurationSource": "schedule", "minSamples": 3,
    }


def test_statistics__with_too_few_samples__the_job_type_s_expectation_applies(client, history):
    _, other = history
    body = client.get(f"/api/v1/schedules/{other['scheduleId']}/statistics").json()
    assert (body["samples"], body["durationSeconds"]["p99"]) == (1, 100.0)
    # demo.sleep over both schedules: (1 + 2 + 10 + 100) / 4
    assert (body["expectedDurationSeconds"], body["expectedDurationSource"]) == (28.25, "jobType")


def test_statistics__without_history__nulls_and_the_default(client):
    schedule = create_schedule(client)
    body = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/statistics").json()
    assert body["samples"] == 0 and set(body["durationSeconds"].values()) == {None}
    assert (body["expectedDurationSeconds"], body["expectedDurationSource"]) == (5.0, "jobType")


def test_statistics__another_tenants_or_a_deleted_schedule_is_404__a_query_parameter_400(client, other_client):
    schedule = create_schedule(client)
    url = f"/api/v1/schedules/{schedule['scheduleId']}/statistics"
    assert_error(other_client.get(url), 404, "not_found")
    assert_error(client.get(url, {"window": "1"}), 400, "invalid_request", "window")
    assert client.delete(f"/api/v1/schedules/{schedule['scheduleId']}").status_code == 204
    assert_error(client.get(url), 404, "not_found")


def test_admin__schedule_and_job_type_pages_show_runtime_statistics(admin_client, history):
    mine, other = history
    page = admin_client.get(f"/admin/schedules/schedule/{mine['scheduleId']}/change/").content.decode()
    assert "Runtime statistics (rolling window)" in page and "3 accepted attempts in the window" in page
    assert "forecasts expect 4.3 s per run (its own mean)" in page
    page = admin_client.get(f"/admin/schedules/schedule/{other['scheduleId']}/change/").content.decode()
    assert "forecasts expect 28.25 s per run (its job type&#x27;s: too few samples of its own)" in page
    page = admin_client.get("/admin/schedules/jobtype/demo.sleep/change/").content.decode()
    assert "4 accepted attempts in the window" in page and "<td>100 s</td>" in page
