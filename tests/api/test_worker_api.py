import hashlib
import time
from datetime import UTC, datetime
from io import StringIO
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.urls import Resolver404, resolve

from tests.api.conftest import assert_error, claim, create_schedule, run_once
from tests.factories import api_client, make_tenant, make_worker_token

pytestmark = pytest.mark.django_db

REPORT = b"region,total\nus,1234\n"


def fenced(claimed, **extra):
    return {"runId": claimed["runId"], "attemptId": claimed["attemptId"], "fence": claimed["fence"], **extra}


def upload(worker_client, claimed, data=REPORT, content_type="text/csv", fence=None):
    fence = claimed["fence"] if fence is None else fence
    path = f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result?fence={fence}"
    return worker_client.put(path, data=data, content_type=content_type)


def complete_success(worker_client, claimed, uploaded):
    return worker_client.post(
        "/api/v1/worker/complete",
        fenced(claimed, outcome="succeeded", object=uploaded["object"], checksum=uploaded["checksum"]),
    )


def test_claim__nothing_claimable_is_204(worker_client):
    response = worker_client.post("/api/v1/worker/claim", {"workerId": "w1"})
    assert response.status_code == 204
    assert response.content == b""


def test_full_flow__claim_heartbeat_upload_complete_download(client, worker_client, queued_run, schedule):
    claimed = claim(worker_client, workerId="w1", resourceClasses=["short"], leaseSeconds=30)
    assert claimed["runId"] == queued_run["runId"]
    assert claimed["attemptId"].startswith("att_")
    assert isinstance(claimed["fence"], int) and claimed["fence"] > 0
    assert claimed["leaseExpiresAt"].endswith("Z")
    assert claimed["jobType"] == "demo.sleep"
    assert claimed["params"] == {"seconds": 0}
    assert claimed["revision"] == 1

    running = client.get(f"/api/v1/runs/{claimed['runId']}").json()
    assert running["state"] == "running"
    assert running["attempt"] == 1
    assert running["attempts"][0]["attemptId"] == claimed["attemptId"]
    assert running["attempts"][0]["state"] == "running"
    assert running["startedAt"].endswith("Z")

    beat = worker_client.post("/api/v1/worker/heartbeat", fenced(claimed))
    assert beat.status_code == 200, beat.content
    assert beat.json()["cancellationRequested"] is False
    assert beat.json()["leaseExpiresAt"] >= claimed["leaseExpiresAt"]

    uploaded = upload(worker_client, claimed)
    assert uploaded.status_code == 201, uploaded.content
    uploaded = uploaded.json()
    assert uploaded["checksum"] == "sha256:" + hashlib.sha256(REPORT).hexdigest()
    assert set(uploaded["object"]) == {"key", "versionId"}

    done = complete_success(worker_client, claimed, uploaded)
    assert done.status_code == 200, done.content
    run = done.json()
    assert run["state"] == "succeeded"
    assert run["result"] == {"checksum": uploaded["checksum"], "size": len(REPORT), "contentType": "text/csv"}
    assert run["finishedAt"].endswith("Z")
    assert run["attempts"][0]["state"] == "succeeded"
    assert client.get(f"/api/v1/runs/{claimed['runId']}").json() == run

    result = client.get(f"/api/v1/runs/{claimed['runId']}/result")
    assert result.status_code == 200, result.content
    result = result.json()
    assert result["checksum"] == uploaded["checksum"]
    assert result["expiresAt"].endswith("Z")
    url = urlsplit(result["url"])
    assert url.scheme in ("http", "https") and url.netloc
    try:
        resolve(url.path)
    except Resolver404:
        pytest.skip("download route not mounted in this URLconf yet")
    download = api_client().get(url.path + ("?" + url.query if url.query else ""))
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == REPORT


def test_complete__repeat_with_same_checksum_returns_saved_run(worker_client, queued_run):
    claimed = claim(worker_client)
    uploaded = upload(worker_client, claimed).json()
    first = complete_success(worker_client, claimed, uploaded)
    again = complete_success(worker_client, claimed, uploaded)
    assert again.status_code == 200
    assert again.json() == first.json()


def test_complete__repeat_with_different_checksum_is_invalid_state(worker_client, queued_run):
    claimed = claim(worker_client)
    uploaded = upload(worker_client, claimed).json()
    complete_success(worker_client, claimed, uploaded)
    other = upload(worker_client, claimed, data=b"other bytes")
    if other.status_code == 201:
        response = complete_success(worker_client, claimed, other.json())
    else:
        response = worker_client.post(
            "/api/v1/worker/complete",
            fenced(claimed, outcome="succeeded", object=uploaded["object"], checksum="sha256:" + "0" * 64),
        )
    assert_error(response, 409, "invalid_state")
    different_outcome = worker_client.post("/api/v1/worker/complete", fenced(claimed, outcome="failed", error="x"))
    assert_error(different_outcome, 409, "invalid_state")


def test_complete__failed_retryable_keeps_the_occurrence(client, worker_client, queued_run):
    claimed = claim(worker_client)
    response = worker_client.post(
        "/api/v1/worker/complete", fenced(claimed, outcome="failed", error="db timeout", retryable=True)
    )
    assert response.status_code == 200, response.content
    run = response.json()
    assert run["runId"] == queued_run["runId"]
    assert run["state"] in ("pending", "queued")
    assert run["attempts"][0]["state"] == "failed"
    assert run["attempts"][0]["error"] == "db timeout"


def test_complete__failed_permanent_is_terminal(worker_client, queued_run):
    claimed = claim(worker_client)
    run = worker_client.post(
        "/api/v1/worker/complete", fenced(claimed, outcome="failed", error="bad query", retryable=False)
    ).json()
    assert run["state"] == "failed"


def test_cancel_while_running__requested_then_accepted(client, worker_client, queued_run):
    claimed = claim(worker_client)
    requested = client.post(f"/api/v1/runs/{claimed['runId']}/cancel").json()
    assert requested["state"] == "running"
    assert requested["cancellationRequested"] is True
    assert requested["cancellationAccepted"] is False
    beat = worker_client.post("/api/v1/worker/heartbeat", fenced(claimed)).json()
    assert beat["cancellationRequested"] is True
    done = worker_client.post("/api/v1/worker/complete", fenced(claimed, outcome="canceled"))
    assert done.status_code == 200, done.content
    assert done.json()["state"] == "canceled"
    assert done.json()["cancellationAccepted"] is True


def test_stale_fence__heartbeat_upload_complete(worker_client, queued_run):
    claimed = claim(worker_client)
    wrong = claimed["fence"] + 1
    assert_error(worker_client.post("/api/v1/worker/heartbeat", fenced(claimed, fence=wrong)), 409, "stale_fence")
    assert_error(upload(worker_client, claimed, fence=wrong), 409, "stale_fence")
    response = worker_client.post(
        "/api/v1/worker/complete", fenced(claimed, fence=wrong, outcome="failed", error="x", retryable=True)
    )
    assert_error(response, 409, "stale_fence")


def test_stale_fence__after_lease_passes_and_run_is_reclaimed(client, worker_client):
    schedule = create_schedule(client, retry={"maxAttempts": 3, "initialDelaySeconds": 0, "maxDelaySeconds": 0})
    run_once(client, schedule["scheduleId"])
    first = claim(worker_client, leaseSeconds=1)
    uploaded = upload(worker_client, first).json()
    time.sleep(1.2)
    # A lease that has passed is stale even before the sweeper runs.
    assert_error(worker_client.post("/api/v1/worker/heartbeat", fenced(first)), 409, "stale_fence")
    call_command("sweep", "--once", stdout=StringIO())
    second_worker = api_client(make_worker_token("worker-2"))
    second = claim(second_worker)
    assert second["runId"] == first["runId"]
    assert second["fence"] > first["fence"]
    assert_error(complete_success(worker_client, first, uploaded), 409, "stale_fence")
    run = client.get(f"/api/v1/runs/{first['runId']}").json()
    assert run["attempt"] == 2
    assert [a["state"] for a in run["attempts"]] == ["expired", "running"]


def test_upload__repeat_with_stale_fence_is_stale_fence(client, worker_client):
    schedule = create_schedule(client, retry={"maxAttempts": 3, "initialDelaySeconds": 0, "maxDelaySeconds": 0})
    run_once(client, schedule["scheduleId"])
    first = claim(worker_client, leaseSeconds=1)
    assert upload(worker_client, first).status_code == 201
    time.sleep(1.1)
    call_command("sweep", "--once", stdout=StringIO())
    claim(api_client(make_worker_token("worker-2")))
    assert_error(upload(worker_client, first, data=b"late, different bytes"), 409, "stale_fence")
    assert_error(upload(worker_client, first), 409, "stale_fence")


def test_unknown_run_or_attempt__is_not_found(worker_client, queued_run):
    claimed = claim(worker_client)
    response = worker_client.post("/api/v1/worker/heartbeat", fenced(claimed, runId="run_nope"))
    assert_error(response, 404, "not_found")
    response = worker_client.post("/api/v1/worker/heartbeat", fenced(claimed, attemptId="att_nope"))
    assert_error(response, 404, "not_found")
    response = worker_client.post("/api/v1/worker/complete", fenced(claimed, runId="run_nope", outcome="canceled"))
    assert_error(response, 404, "not_found")
    path = f"/api/v1/worker/runs/run_nope/attempts/{claimed['attemptId']}/result?fence={claimed['fence']}"
    assert_error(worker_client.put(path, data=b"x", content_type="text/plain"), 404, "not_found")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"workerId": "w", "colour": "red"}, "colour"),
        ({"leaseSeconds": 0}, "leaseSeconds"),
        ({"leaseSeconds": 3601}, "leaseSeconds"),
        ({"leaseSeconds": "30"}, "leaseSeconds"),
        ({"leaseSeconds": 30.5}, "leaseSeconds"),
        ({"leaseSeconds": True}, "leaseSeconds"),
        ({"resourceClasses": ["gpu"]}, "resourceClasses"),
        ({"resourceClasses": "short"}, "resourceClasses"),
        ({"workerId": 7}, "workerId"),
    ],
)
def test_claim__strict_body(worker_client, body, field):
    response = worker_client.post("/api/v1/worker/claim", body)
    error = assert_error(response, 400, "invalid_request")
    assert error["details"]["field"].split(".")[0] == field


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"fence": "42"}, "fence"),
        ({"fence": 4.0}, "fence"),
        ({"fence": -1}, "fence"),
        ({"fence": None}, "fence"),
        ({"fence": 2**64}, "fence"),
        ({"runId": 5}, "runId"),
        ({"extra": True}, "extra"),
    ],
)
def test_heartbeat__strict_body(worker_client, patch, field):
    body = {"runId": "run_x", "attemptId": "att_x", "fence": 1, **patch}
    assert_error(worker_client.post("/api/v1/worker/heartbeat", body), 400, "invalid_request", field=field)


def test_heartbeat__missing_fields(worker_client):
    assert_error(worker_client.post("/api/v1/worker/heartbeat", {"runId": "run_x", "attemptId": "a"}), 400, "invalid_request", field="fence")


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"outcome": "exploded"}, "outcome"),
        ({"outcome": "succeeded"}, "object"),
        ({"outcome": "succeeded", "object": {"key": "k"}}, "checksum"),
        ({"outcome": "succeeded", "object": {"key": "k"}, "checksum": "md5:abc"}, "checksum"),
        ({"outcome": "succeeded", "object": {"key": "k", "size": 3}, "checksum": "sha256:" + "a" * 64}, "object.size"),
        ({"outcome": "failed", "retryable": "yes"}, "retryable"),
        ({"outcome": "failed", "error": 5}, "error"),
    ],
)
def test_complete__strict_body(worker_client, patch, field):
    body = {"runId": "run_x", "attemptId": "att_x", "fence": 1, **patch}
    assert_error(worker_client.post("/api/v1/worker/complete", body), 400, "invalid_request", field=field)


@pytest.mark.parametrize("query", ["", "?fence=", "?fence=abc", "?fence=-1", "?fence=1.5", "?fence=99999999999999999999"])
def test_upload__fence_must_be_an_integer(worker_client, query):
    response = worker_client.put(f"/api/v1/worker/runs/run_x/attempts/att_x/result{query}", data=b"x", content_type="text/plain")
    assert_error(response, 400, "invalid_request", field="fence")


def test_upload__never_overwrites(worker_client, queued_run):
    claimed = claim(worker_client)
    first = upload(worker_client, claimed, data=b"one").json()
    second = upload(worker_client, claimed, data=b"two")
    if second.status_code == 201:
        assert second.json()["object"] != first["object"]
    else:
        assert second.json()["error"]["code"] in ("invalid_state", "stale_fence")


def test_token_confusion(client, worker_client, queued_run):
    claimed = claim(worker_client)
    # A tenant token never works on worker endpoints...
    assert_error(client.post("/api/v1/worker/claim", {}), 403, "forbidden")
    assert_error(client.post("/api/v1/worker/heartbeat", fenced(claimed)), 403, "forbidden")
    assert_error(client.post("/api/v1/worker/complete", fenced(claimed, outcome="canceled")), 403, "forbidden")
    path = f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result?fence={claimed['fence']}"
    assert_error(client.put(path, data=b"x", content_type="text/plain"), 403, "forbidden")
    # ...nor a worker token on tenant endpoints.
    assert_error(worker_client.get(f"/api/v1/runs/{claimed['runId']}"), 403, "forbidden")
    assert_error(worker_client.post(f"/api/v1/runs/{claimed['runId']}/cancel"), 403, "forbidden")
    assert_error(worker_client.get("/api/v1/schedules"), 403, "forbidden")
    # The run is untouched by the rejected calls.
    assert client.get(f"/api/v1/runs/{claimed['runId']}").json()["state"] == "running"


def test_claim__resource_class_filter(client, worker_client, schedule):
    run_once(client, schedule["scheduleId"])
    assert worker_client.post("/api/v1/worker/claim", {"resourceClasses": ["long"]}).status_code == 204
    assert worker_client.post("/api/v1/worker/claim", {"resourceClasses": ["short"]}).status_code == 200




def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_claim__lease_defaults_to_the_job_types(worker_client, queued_run):
    claimed = claim(worker_client)
    assert claimed["leaseSeconds"] == 30  # demo.sleep's default lease
    remaining = (_parse(claimed["leaseExpiresAt"]) - datetime.now(UTC)).total_seconds()
    assert 25 < remaining <= 31


def test_heartbeat__extends_lease_by_the_claimed_seconds(worker_client, queued_run):
    claimed = claim(worker_client, leaseSeconds=120)
    beat = worker_client.post("/api/v1/worker/heartbeat", fenced(claimed)).json()
    remaining = (_parse(beat["leaseExpiresAt"]) - datetime.now(UTC)).total_seconds()
    assert 115 < remaining <= 121
    assert beat["leaseExpiresAt"] >= claimed["leaseExpiresAt"]


def test_effects__appear_when_the_result_is_published(client, worker_client):
    schedule = create_schedule(client, effects={"email": {"to": ["sales@example.com"]}})
    run = run_once(client, schedule["scheduleId"])
    assert run["effects"] == []
    claimed = claim(worker_client)
    assert client.get(f"/api/v1/runs/{run['runId']}").json()["effects"] == []
    uploaded = upload(worker_client, claimed).json()
    done = complete_success(worker_client, claimed, uploaded).json()
    assert done["effects"] == [{"action": f"send-{run['runId']}", "kind": "email", "state": "pending",
                                "reason": None}]


def test_claim__tenant_at_max_active_runs_is_passed_over(worker_client):
    limited = api_client(make_tenant("limited", max_active_runs=1))
    first = create_schedule(limited, name="a")
    second = create_schedule(limited, name="b")
    run_once(limited, first["scheduleId"])
    waiting = run_once(limited, second["scheduleId"])
    claim(worker_client)
    assert worker_client.post("/api/v1/worker/claim", {}).status_code == 204
    assert limited.get(f"/api/v1/runs/{waiting['runId']}").json()["state"] == "queued"


def test_claim__overlap_buffer_one_holds_second_run_pending(client, worker_client, schedule):
    first = run_once(client, schedule["scheduleId"])
    second = run_once(client, schedule["scheduleId"])
    claimed = claim(worker_client)
    assert claimed["runId"] == first["runId"]
    assert worker_client.post("/api/v1/worker/claim", {}).status_code == 204
    assert client.get(f"/api/v1/runs/{second['runId']}").json()["state"] == "pending"
