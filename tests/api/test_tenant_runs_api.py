"""GET /api/v1/runs: every run of the tenant's schedules, filtered and keyset-paged."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.api.conftest import assert_error, create_schedule, run_once

pytestmark = pytest.mark.django_db

BASE = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=10)


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _runs(client, **params):
    response = client.get("/api/v1/runs", params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def two_schedules(client):
    """A sleep schedule with runs at BASE+0..3 h (the one at +1 h canceled) and an export schedule
    with one run at BASE+2 h 30."""
    sleep = create_schedule(client, name="sleep")
    export = create_schedule(client, name="export", jobType="demo.export", params={})
    runs = [run_once(client, sleep["scheduleId"], {"runAt": iso(BASE + timedelta(hours=i))}) for i in range(4)]
    canceled = client.post(f"/api/v1/runs/{runs[1]['runId']}/cancel")
    assert canceled.status_code == 200
    runs.append(run_once(client, export["scheduleId"], {"runAt": iso(BASE + timedelta(hours=2, minutes=30))}))
    return sleep, export, runs


def test_runs__every_schedule_newest_first(client, two_schedules):
    *_, made = two_schedules
    page = _runs(client)
    assert set(page) == {"results", "nextCursor", "watermark"}
    assert page["nextCursor"] is None and page["watermark"].endswith("Z")
    keys = [(r["scheduledAt"], r["runId"]) for r in page["results"]]
    assert keys == sorted(keys, reverse=True)
    assert {r["runId"] for r in page["results"]} == {r["runId"] for r in made}


def test_runs__filters(client, two_schedules):
    sleep, export, made = two_schedules
    assert [r["runId"] for r in _runs(client, state="canceled")["results"]] == [made[1]["runId"]]
    both = _runs(client, state="canceled,queued")["results"]
    assert {r["state"] for r in both} == {"canceled", "queued"} and len(both) == 5
    assert [r["runId"] for r in _runs(client, jobType="demo.export")["results"]] == [made[4]["runId"]]
    only_sleep = _runs(client, scheduleId=sleep["scheduleId"])["results"]
    assert {r["scheduleId"] for r in only_sleep} == {sleep["scheduleId"]} and len(only_sleep) == 4
    since = _runs(client, since=iso(BASE + timedelta(hours=2)))["results"]
    assert [r["runId"] for r in since] == [made[3]["runId"], made[4]["runId"], made[2]["runId"]]
    combined = _runs(client, state="queued", jobType="demo.sleep", since=iso(BASE + timedelta(hours=1)))
    assert [r["runId"] for r in combined["results"]] == [made[3]["runId"], made[2]["runId"]]


def test_runs__deleted_schedules_stay_listed(client, two_schedules):
    sleep, _, _ = two_schedules
    assert client.delete(f"/api/v1/schedules/{sleep['scheduleId']}").status_code == 204
    assert len(_runs(client, scheduleId=sleep["scheduleId"])["results"]) == 4
    assert len(_runs(client)["results"]) == 5


def test_runs__paging_is_stable_and_cursor_bound_to_its_filters(client, two_schedules):
    sleep, _, made = two_schedules
    first = _runs(client, limit=2, state="queued")
    seen = [r["runId"] for r in first["results"]]
    cursor = first["nextCursor"]
    assert cursor
    # A run created while paging, older than the boundary, is not repeated and skips nothing.
    run_once(client, sleep["scheduleId"], {"runAt": iso(BASE - timedelta(hours=1))})
    assert_error(client.get("/api/v1/runs", {"cursor": cursor}), 400, "invalid_request", field="cursor")
    assert_error(
        client.get("/api/v1/runs", {"cursor": cursor, "state": "canceled"}), 400, "invalid_request", field="cursor"
    )
    while cursor:
        page = _runs(client, limit=2, state="queued", cursor=cursor)
        assert page["watermark"] == first["watermark"]
        seen += [r["runId"] for r in page["results"]]
        cursor = page["nextCursor"]
    assert seen == [made[3]["runId"], made[4]["runId"], made[2]["runId"], made[0]["runId"]]


def test_runs__tenant_isolation(client, other_client, two_schedules):
    sleep, _, _ = two_schedules
    assert _runs(other_client)["results"] == []
    assert_error(other_client.get("/api/v1/runs", {"scheduleId": sleep["scheduleId"]}), 404, "not_found")
    assert_error(client.get("/api/v1/runs", {"scheduleId": "sch_nope"}), 404, "not_found")
    assert_error(client.get("/api/v1/runs", {"scheduleId": "bad id!"}), 404, "not_found")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "broken"}, "state"),
        ({"state": "failed,"}, "state"),
        ({"state": ""}, "state"),
        ({"jobType": "no.such"}, "jobType"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-01T00:00:00"}, "since"),
        ({"since": "0001-01-01T00:00:00+01:00"}, "since"),
        ({"limit": "0"}, "limit"),
        ({"cursor": "e30"}, "cursor"),
        ({"status": "failed"}, "status"),
    ],
)
def test_runs__bad_filters_are_invalid_request(client, params, field):
    assert_error(client.get("/api/v1/runs", params), 400, "invalid_request", field=field)


def test_runs__needs_a_tenant_token(anonymous, worker_client):
    assert_error(anonymous.get("/api/v1/runs"), 401, "unauthenticated")
    assert_error(worker_client.get("/api/v1/runs"), 403, "forbidden")
