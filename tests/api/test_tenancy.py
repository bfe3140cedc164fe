"""Another tenant's ids answer 404, exactly like ids that do not exist, on every endpoint."""

import pytest

from tests.api.conftest import CRON_BODY, assert_error, claim, create_schedule, run_once

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign(client, worker_client):
    """A schedule and a succeeded run that belong to the `client` tenant."""
    schedule = create_schedule(client)
    run = run_once(client, schedule["scheduleId"])
    claimed = claim(worker_client)
    path = f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result?fence={claimed['fence']}"
    uploaded = worker_client.put(path, data=b"secret report", content_type="text/plain").json()
    done = worker_client.post(
        "/api/v1/worker/complete",
        {
            "runId": claimed["runId"],
            "attemptId": claimed["attemptId"],
            "fence": claimed["fence"],
            "outcome": "succeeded",
            "object": uploaded["object"],
            "checksum": uploaded["checksum"],
        },
    )
    assert done.status_code == 200, done.content
    pending = run_once(client, schedule["scheduleId"], {"runAt": "2999-01-01T00:00:00Z"})
    return {"scheduleId": schedule["scheduleId"], "runId": run["runId"], "pendingRunId": pending["runId"]}


def endpoints(ids):
    sch, run, pending = ids["scheduleId"], ids["runId"], ids["pendingRunId"]
    return [
        ("get", f"/api/v1/schedules/{sch}", None),
        ("patch", f"/api/v1/schedules/{sch}", {"expectedRevision": 1, "name": "hijacked"}),
        ("post", f"/api/v1/schedules/{sch}/pause", None),
        ("post", f"/api/v1/schedules/{sch}/resume", None),
        ("get", f"/api/v1/schedules/{sch}/runs", None),
        ("post", f"/api/v1/schedules/{sch}/runs", {}),
        ("get", f"/api/v1/runs/{run}", None),
        ("get", f"/api/v1/runs/{run}/result", None),
        ("post", f"/api/v1/runs/{pending}/cancel", None),
        ("delete", f"/api/v1/schedules/{sch}", None),
    ]


def test_every_endpoint__other_tenants_ids_are_not_found(client, other_client, foreign):
    for method, path, body in endpoints(foreign):
        response = getattr(other_client, method)(path, body) if body is not None else getattr(other_client, method)(path)
        assert_error(response, 404, "not_found")
    # Nothing the other tenant tried had any effect.
    schedule = client.get(f"/api/v1/schedules/{foreign['scheduleId']}").json()
    assert schedule["name"] == CRON_BODY["name"]
    assert schedule["revision"] == 1
    assert schedule["paused"] is False
    assert client.get(f"/api/v1/runs/{foreign['pendingRunId']}").json()["state"] == "pending"
    history = client.get(f"/api/v1/schedules/{foreign['scheduleId']}/runs").json()["results"]
    assert len(history) == 2


def test_foreign_ids_look_exactly_like_missing_ids(other_client, foreign):
    foreign_response = other_client.get(f"/api/v1/runs/{foreign['runId']}")
    missing_response = other_client.get("/api/v1/runs/run_00000000000000000000000000")
    assert foreign_response.status_code == missing_response.status_code == 404
    assert foreign_response.json() == missing_response.json()


def test_listing_shows_only_own_schedules(client, other_client, foreign):
    create_schedule(other_client, name="theirs")
    mine = [s["scheduleId"] for s in client.get("/api/v1/schedules").json()["results"]]
    theirs = [s["name"] for s in other_client.get("/api/v1/schedules").json()["results"]]
    assert mine == [foreign["scheduleId"]]
    assert theirs == ["theirs"]


def test_idempotency_keys_are_per_tenant(client, other_client):
    a = client.post("/api/v1/schedules", CRON_BODY, HTTP_IDEMPOTENCY_KEY="shared")
    b = other_client.post("/api/v1/schedules", {**CRON_BODY, "name": "different"}, HTTP_IDEMPOTENCY_KEY="shared")
    assert a.status_code == b.status_code == 201
    assert a.json()["scheduleId"] != b.json()["scheduleId"]
