from datetime import UTC, datetime, timedelta

import pytest

from tests.api.conftest import assert_error, create_schedule, run_once

pytestmark = pytest.mark.django_db

RUN_FIELDS = {
    "runId",
    "scheduleId",
    "revision",
    "state",
    "attempt",
    "scheduledAt",
    "dueAt",
    "startedAt",
    "finishedAt",
    "skipReason",
    "cancellationRequested",
    "cancellationAccepted",
    "attempts",
    "result",
    "effects",
}


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_run_once__queued_run_object(client, schedule):
    response = client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs", {})
    assert response.status_code == 201, response.content
    run = response.json()
    assert RUN_FIELDS <= set(run)
    assert run["runId"].startswith("run_")
    assert run["scheduleId"] == schedule["scheduleId"]
    assert run["revision"] == 1
    assert run["state"] == "queued"
    assert run["attempt"] == 0
    assert run["attempts"] == []
    assert run["result"] is None
    assert run["effects"] == []
    assert run["startedAt"] is None and run["finishedAt"] is None
    assert run["cancellationRequested"] is False and run["cancellationAccepted"] is False
    assert run["scheduledAt"].endswith("Z") and run["dueAt"].endswith("Z")


def test_run_once__empty_body_is_allowed(client, schedule):
    response = client.generic("POST", f"/api/v1/schedules/{schedule['scheduleId']}/runs", b"")
    assert response.status_code == 201, response.content


def test_run_once__future_run_at_is_pending(client, schedule):
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    run = run_once(client, schedule["scheduleId"], {"runAt": iso(at)})
    assert run["state"] == "pending"
    assert run["scheduledAt"] == iso(at)


def test_run_once__past_run_at_is_queued(client, schedule):
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    run = run_once(client, schedule["scheduleId"], {"runAt": iso(at)})
    assert run["state"] == "queued"
    assert run["scheduledAt"] == iso(at)


def test_run_once__params_override_validated(client, schedule):
    path = f"/api/v1/schedules/{schedule['scheduleId']}/runs"
    assert client.post(path, {"params": {"seconds": 3}}).status_code == 201
    assert_error(client.post(path, {"params": {"seconds": "x"}}), 400, "invalid_request")
    assert_error(client.post(path, {"runAt": "yesterday"}), 400, "invalid_request", field="runAt")
    assert_error(client.post(path, {"bogus": 1}), 400, "invalid_request", field="bogus")


def test_run_once__idempotency_key_returns_same_run(client, schedule):
    path = f"/api/v1/schedules/{schedule['scheduleId']}/runs"
    first = client.post(path, {}, HTTP_IDEMPOTENCY_KEY="manual-1")
    again = client.post(path, {}, HTTP_IDEMPOTENCY_KEY="manual-1")
    assert first.status_code == 201
    assert again.status_code in (200, 201)
    assert again.json()["runId"] == first.json()["runId"]
    conflict = client.post(path, {"params": {"seconds": 9}}, HTTP_IDEMPOTENCY_KEY="manual-1")
    assert_error(conflict, 409, "idempotency_conflict")


def test_run_once__idempotency_key_is_scoped_to_schedule(client, schedule):
    other = create_schedule(client, name="other")
    a = run_once(client, schedule["scheduleId"], HTTP_IDEMPOTENCY_KEY="same")
    b = run_once(client, other["scheduleId"], HTTP_IDEMPOTENCY_KEY="same")
    assert a["runId"] != b["runId"]


def test_get_run__reads_authority(client, queued_run):
    response = client.get(f"/api/v1/runs/{queued_run['runId']}")
    assert response.status_code == 200
    assert response.json() == queued_run


def test_cancel__queued_run_is_canceled(client, queued_run):
    response = client.post(f"/api/v1/runs/{queued_run['runId']}/cancel")
    assert response.status_code == 200
    assert response.json()["state"] == "canceled"
    assert client.get(f"/api/v1/runs/{queued_run['runId']}").json()["state"] == "canceled"


def test_cancel__pending_run_is_canceled(client, schedule):
    at = datetime.now(UTC) + timedelta(days=1)
    run = run_once(client, schedule["scheduleId"], {"runAt": iso(at)})
    assert client.post(f"/api/v1/runs/{run['runId']}/cancel").json()["state"] == "canceled"


def test_cancel__terminal_run_is_invalid_state(client, queued_run):
    client.post(f"/api/v1/runs/{queued_run['runId']}/cancel")
    assert_error(client.post(f"/api/v1/runs/{queued_run['runId']}/cancel"), 409, "invalid_state")


def test_result__before_success_is_invalid_state(client, queued_run):
    assert_error(client.get(f"/api/v1/runs/{queued_run['runId']}/result"), 409, "invalid_state")


def _history(client, schedule_id, **params):
    response = client.get(f"/api/v1/schedules/{schedule_id}/runs", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_history__ordered_by_scheduled_at_then_id_descending(client, schedule):
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
    made = [run_once(client, schedule["scheduleId"], {"runAt": iso(base + timedelta(minutes=i))}) for i in range(4)]
    # Two runs at the same instant are ordered by runId.
    made.append(run_once(client, schedule["scheduleId"], {"runAt": iso(base + timedelta(minutes=2))}))
    page = _history(client, schedule["scheduleId"])
    assert set(page) == {"results", "nextCursor", "watermark"}
    assert page["nextCursor"] is None
    keys = [(r["scheduledAt"], r["runId"]) for r in page["results"]]
    assert keys == sorted(keys, reverse=True)
    assert {r["runId"] for r in page["results"]} == {r["runId"] for r in made}


def test_history__paging_is_stable_while_runs_are_created(client, schedule):
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
    originals = [
        run_once(client, schedule["scheduleId"], {"runAt": iso(base + timedelta(minutes=i))})["runId"] for i in range(7)
    ]
    first = _history(client, schedule["scheduleId"], limit=3)
    assert first["watermark"].endswith("Z")
    seen = [r["runId"] for r in first["results"]]
    cursor = first["nextCursor"]
    # New runs, older and newer than the page boundary, arrive while the client pages.
    run_once(client, schedule["scheduleId"], {"runAt": iso(base - timedelta(minutes=30))})
    run_once(client, schedule["scheduleId"], {"runAt": iso(base + timedelta(minutes=3, seconds=30))})
    while cursor:
        page = _history(client, schedule["scheduleId"], limit=3, cursor=cursor)
        assert page["watermark"] == first["watermark"]
        seen += [r["runId"] for r in page["results"]]
        cursor = page["nextCursor"]
    assert len(seen) == len(set(seen)), "a run was repeated"
    assert set(originals) <= set(seen), "an older run was skipped"


def test_history__watermark_covers_existing_runs(client, queued_run, schedule):
    page = _history(client, schedule["scheduleId"])
    watermark = datetime.fromisoformat(page["watermark"].replace("Z", "+00:00"))
    created = datetime.fromisoformat(queued_run["createdAt"].replace("Z", "+00:00"))
    assert watermark >= created


def test_history__cursor_is_tamper_evident_and_bound_to_schedule(client, schedule):
    other = create_schedule(client, name="other")
    for _ in range(3):
        run_once(client, schedule["scheduleId"])
    cursor = _history(client, schedule["scheduleId"], limit=1)["nextCursor"]
    path = f"/api/v1/schedules/{schedule['scheduleId']}/runs"
    assert_error(client.get(path, {"cursor": cursor + "x"}), 400, "invalid_request", field="cursor")
    assert_error(client.get(path, {"cursor": "e30"}), 400, "invalid_request", field="cursor")
    other_path = f"/api/v1/schedules/{other['scheduleId']}/runs"
    assert_error(client.get(other_path, {"cursor": cursor}), 400, "invalid_request", field="cursor")
    assert_error(client.get(path, {"limit": 0}), 400, "invalid_request", field="limit")
