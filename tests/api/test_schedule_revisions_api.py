"""GET /schedules/{id}/revisions and GET /schedules/{id}/preview."""

import pytest

from schedules.models import AuthorKind, ScheduleRevision
from tests.api.conftest import assert_error, create_schedule

pytestmark = pytest.mark.django_db


def _revise(client, schedule_id, revision, **changes):
    response = client.patch(f"/api/v1/schedules/{schedule_id}", {"expectedRevision": revision, **changes})
    assert response.status_code == 200, response.content
    return response.json()


def test_revisions__newest_first_with_what_each_set(client, schedule):
    sid = schedule["scheduleId"]
    _revise(client, sid, 1, params={"seconds": 2}, effects={"email": {"to": ["a@example.com"]}})
    _revise(client, sid, 2, recurrence={"kind": "interval", "everySeconds": 60, "anchor": "2026-01-01T00:00:00Z"})
    response = client.get(f"/api/v1/schedules/{sid}/revisions")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["nextCursor"] is None
    third, second, first = body["results"]
    assert [r["revision"] for r in (third, second, first)] == [3, 2, 1]
    assert first["params"] == {"seconds": 0} and first["effects"] == {}
    assert first["recurrence"] == schedule["recurrence"]
    assert second["params"] == {"seconds": 2} and second["effects"] == {"email": {"to": ["a@example.com"]}}
    assert third["recurrence"]["kind"] == "interval" and third["params"] == {"seconds": 2}
    assert set(first) == {
        "revision", "createdAt", "authorKind", "name", "params", "recurrence", "misfirePolicy",
        "misfireGraceSeconds", "overlapPolicy", "retry", "effects", "startDeadlineSeconds", "jitterSeconds",
        "concurrencyKey", "activeFrom", "activeUntil", "endAfterOccurrences", "labels", "calendar", "instantsDiff",
        "expectations",
    }
    assert (first["startDeadlineSeconds"], first["jitterSeconds"]) == (None, 0)
    assert first["authorKind"] == "api" and first["createdAt"].endswith("Z")
    assert first["retry"] == schedule["retry"]
    assert first["misfirePolicy"] == "latest_only" and first["overlapPolicy"] == "buffer_one"


def test_revisions__admin_author_kind_is_shown(client, schedule):
    ScheduleRevision.objects.filter(schedule_id=schedule["scheduleId"]).update(author_kind=AuthorKind.ADMIN)
    body = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/revisions").json()
    assert body["results"][0]["authorKind"] == "admin"


def test_revisions__paged_and_readable_after_delete(client, schedule):
    sid = schedule["scheduleId"]
    for revision in range(1, 5):
        _revise(client, sid, revision, name=f"n{revision}")
    assert client.delete(f"/api/v1/schedules/{sid}").status_code == 204
    seen, cursor = [], None
    while True:
        response = client.get(f"/api/v1/schedules/{sid}/revisions", {"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.content
        seen += [r["revision"] for r in response.json()["results"]]
        cursor = response.json()["nextCursor"]
        if not cursor:
            break
    assert seen == [5, 4, 3, 2, 1]


def test_revisions__errors_and_isolation(client, other_client, schedule):
    sid = schedule["scheduleId"]
    other = create_schedule(client, name="other")
    cursor = client.get(f"/api/v1/schedules/{sid}/revisions", {"limit": 1}).json()["nextCursor"]
    assert cursor is None  # one revision only
    _revise(client, sid, 1, name="renamed")
    cursor = client.get(f"/api/v1/schedules/{sid}/revisions", {"limit": 1}).json()["nextCursor"]
    path = f"/api/v1/schedules/{other['scheduleId']}/revisions"
    assert_error(client.get(path, {"cursor": cursor}), 400, "invalid_request", field="cursor")
    assert_error(client.get(path, {"limit": "0"}), 400, "invalid_request", field="limit")
    assert_error(client.get(path, {"count": "1"}), 400, "invalid_request", field="count")
    assert_error(other_client.get(f"/api/v1/schedules/{sid}/revisions"), 404, "not_found")
    assert_error(client.get("/api/v1/schedules/sch_nope/revisions"), 404, "not_found")


def test_preview__the_schedules_rule(client):
    schedule = create_schedule(
        client, recurrence={"kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York"}
    )
    response = client.get(
        f"/api/v1/schedules/{schedule['scheduleId']}/preview", {"count": "3", "after": "2027-03-13T00:00:00Z"}
    )
    assert response.status_code == 200, response.content
    # Same answer as previewing the rule itself (2027-03-14 02:30 does not exist in New York).
    same = client.post(
        "/api/v1/schedules/preview",
        {"recurrence": schedule["recurrence"], "count": 3, "after": "2027-03-13T00:00:00Z"},
    )
    # ... each instant with its due instant too: the same without jitter.
    assert [{k: i[k] for k in ("at", "local")} for i in response.json()["instants"]] == same.json()["instants"]
    assert all(i["dueAt"] == i["at"] for i in response.json()["instants"])
    assert [i["at"] for i in response.json()["instants"]] == [
        "2027-03-13T07:30:00Z", "2027-03-14T07:30:00Z", "2027-03-15T06:30:00Z",
    ]


def test_preview__defaults_to_five_after_now_and_works_while_paused(client, schedule):
    assert client.post(f"/api/v1/schedules/{schedule['scheduleId']}/pause").status_code == 200
    response = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview")
    assert response.status_code == 200
    instants = response.json()["instants"]
    assert len(instants) == 5 and instants[0]["at"] == schedule["nextRunAt"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"count": "0"}, "count"),
        ({"count": "101"}, "count"),
        ({"count": "x"}, "count"),
        ({"after": "tomorrow"}, "after"),
        ({"after": "2027-01-01T00:00:00"}, "after"),
        ({"after": "0001-01-01T00:00:00+01:00"}, "after"),
        ({"limit": "5"}, "limit"),
    ],
)
def test_preview__bad_query_is_invalid_request(client, schedule, params, field):
    response = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview", params)
    assert_error(response, 400, "invalid_request", field=field)


def test_preview__isolation_and_deleted(client, other_client, schedule):
    sid = schedule["scheduleId"]
    assert_error(other_client.get(f"/api/v1/schedules/{sid}/preview"), 404, "not_found")
    assert client.delete(f"/api/v1/schedules/{sid}").status_code == 204
    assert_error(client.get(f"/api/v1/schedules/{sid}/preview"), 404, "not_found")
    assert client.get(f"/api/v1/schedules/{sid}/preview", {"count": "0"}).status_code == 400
