import json
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from schedules.recurrence import parse_rule, preview
from tests.api.conftest import CRON_BODY, assert_error, create_schedule
from tests.e2e.processes import ROOT
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db

SCHEDULES = "/api/v1/schedules"
INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_create__returns_contract_fields(client):
    before = datetime.now(UTC)
    response = client.post(SCHEDULES, CRON_BODY)
    assert response.status_code == 201
    body = response.json()
    assert body["scheduleId"].startswith("sch_")
    assert body["revision"] == 1
    assert body["paused"] is False
    assert body["name"] == "sales-report"
    assert body["jobType"] == "demo.sleep"
    assert body["params"] == {"seconds": 0}
    assert body["recurrence"]["kind"] == "cron"
    assert body["recurrence"]["timezone"] == "America/New_York"
    assert body["misfirePolicy"] == "latest_only"
    assert body["overlapPolicy"] == "buffer_one"
    assert body["misfireGraceSeconds"] == 60
    assert set(body["retry"]) == {"maxAttempts", "initialDelaySeconds", "maxDelaySeconds"}
    for field in ("nextRunAt", "createdAt", "updatedAt"):
        assert INSTANT.match(body[field]), (field, body[field])
    # The next weekday 09:00 in New York, resolved to UTC.
    rule = parse_rule(CRON_BODY["recurrence"])
    expected = preview(rule, before - timedelta(seconds=1), 1)[0]
    assert parse_instant(body["nextRunAt"]) == expected
    assert body["nextRunAtLocal"].startswith(expected.astimezone(ZoneInfo("America/New_York")).strftime("%Y-%m-%dT09:00:00"))
    assert body["nextRunAtLocal"][-6:] in ("-04:00", "-05:00")


def test_create__explicit_policies_round_trip(client):
    body = {
        **CRON_BODY,
        "misfirePolicy": "run_all",
        "misfireGraceSeconds": 120,
        "overlapPolicy": "allow",
        "retry": {"maxAttempts": 5, "initialDelaySeconds": 2, "maxDelaySeconds": 60},
        "effects": {"email": {"to": ["sales@example.com"]}},
    }
    created = create_schedule(client, **body)
    assert created["misfirePolicy"] == "run_all"
    assert created["misfireGraceSeconds"] == 120
    assert created["overlapPolicy"] == "allow"
    assert created["retry"] == {"maxAttempts": 5, "initialDelaySeconds": 2, "maxDelaySeconds": 60}
    assert created["effects"] == {"email": {"to": ["sales@example.com"]}}
    assert client.get(f"{SCHEDULES}/{created['scheduleId']}").json() == created


def test_create__timezone_defaults_to_utc(client):
    created = create_schedule(client, recurrence={"kind": "cron", "cron": "15 3 * * *"})
    assert created["recurrence"].get("timezone", "UTC") == "UTC"
    next_run = parse_instant(created["nextRunAt"])
    assert (next_run.hour, next_run.minute) == (3, 15)


def test_create__interval_first_instant_not_before_creation(client):
    anchor = "2020-01-01T00:00:00Z"
    created = create_schedule(client, recurrence={"kind": "interval", "everySeconds": 3600, "anchor": anchor})
    next_run = parse_instant(created["nextRunAt"])
    assert next_run >= parse_instant(created["createdAt"]) - timedelta(seconds=1)
    assert (next_run - parse_instant(anchor)).total_seconds() % 3600 == 0


def test_create__interval_without_anchor_anchors_at_the_request_first_due_one_period_later(client):
    before = datetime.now(UTC)
    created = create_schedule(client, recurrence={"kind": "interval", "everySeconds": 900})
    anchor = parse_instant(created["recurrence"]["anchor"])
    assert before - timedelta(seconds=1) <= anchor <= parse_instant(created["createdAt"])
    assert parse_instant(created["nextRunAt"]) == anchor + timedelta(seconds=900)  # microseconds kept


def docs_recurrence_example(kind: str) -> dict:
    """The `"recurrence": {...}` example of ``kind`` in docs/api.md, as written there."""
    text = (ROOT / "docs" / "api.md").read_text()
    [example] = re.findall(r'^ *"recurrence": (\{"kind": "%s".*\})$' % kind, text, flags=re.MULTILINE)
    return json.loads(example)


@pytest.mark.parametrize("kind", ["interval", "after_completion"])
def test_create__the_docs_recurrence_examples_as_written(client, kind):
    recurrence = docs_recurrence_example(kind)
    created = create_schedule(client, recurrence=recurrence)
    assert created["recurrence"] == {"timezone": "UTC", **recurrence}


def test_create__after_completion_is_due_at_creation(client):
    created = create_schedule(client, recurrence={"kind": "after_completion", "delaySeconds": 30})
    delta = abs(parse_instant(created["nextRunAt"]) - parse_instant(created["createdAt"]))
    assert delta <= timedelta(seconds=1)


def test_create__idempotent_replay_returns_same_schedule(client):
    first = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="abc")
    second = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="abc")
    assert first.status_code == 201
    assert second.status_code in (200, 201)
    assert second.json()["scheduleId"] == first.json()["scheduleId"]
    assert len(client.get(SCHEDULES).json()["results"]) == 1


def test_create__same_key_different_body_conflicts(client):
    client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="abc")
    response = client.post(SCHEDULES, {**CRON_BODY, "params": {"seconds": 1}}, HTTP_IDEMPOTENCY_KEY="abc")
    assert_error(response, 409, "idempotency_conflict")


def test_get__returns_schedule(client, schedule):
    response = client.get(f"{SCHEDULES}/{schedule['scheduleId']}")
    assert response.status_code == 200
    assert response.json() == schedule


def test_list__pages_by_id_with_opaque_cursor(client):
    ids = [create_schedule(client, name=f"s{i}")["scheduleId"] for i in range(5)]
    seen, cursor, pages = [], None, 0
    while True:
        response = client.get(SCHEDULES, {"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200
        page = response.json()
        assert set(page) == {"results", "nextCursor"}
        seen += [s["scheduleId"] for s in page["results"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == sorted(ids)
    assert pages == 3


def test_list__default_limit_and_bounds(client):
    create_schedule(client)
    assert len(client.get(SCHEDULES).json()["results"]) == 1
    for bad in ("0", "201", "-1", "abc", "1.5", ""):
        assert_error(client.get(SCHEDULES, {"limit": bad}), 400, "invalid_request", field="limit")


def test_list__tampered_cursor_is_invalid_request(client):
    for i in range(3):
        create_schedule(client, name=f"s{i}")
    cursor = client.get(SCHEDULES, {"limit": 1}).json()["nextCursor"]
    tampered = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    for bad in (tampered, "garbage", "a:b:c", "x" * 5000):
        assert_error(client.get(SCHEDULES, {"cursor": bad}), 400, "invalid_request", field="cursor")


def test_list__cursor_is_bound_to_its_tenant(client, other_client):
    for i in range(2):
        create_schedule(client, name=f"s{i}")
    cursor = client.get(SCHEDULES, {"limit": 1}).json()["nextCursor"]
    assert_error(other_client.get(SCHEDULES, {"cursor": cursor}), 400, "invalid_request", field="cursor")


def test_patch__bumps_revision_and_changes_fields(client, schedule):
    path = f"{SCHEDULES}/{schedule['scheduleId']}"
    response = client.patch(
        path,
        {
            "expectedRevision": 1,
            "name": "renamed",
            "params": {"seconds": 2},
            "recurrence": {"kind": "cron", "cron": "30 10 * * *", "timezone": "Europe/Paris"},
            "misfirePolicy": "skip",
            "misfireGraceSeconds": 5,
            "overlapPolicy": "skip",
            "retry": {"maxAttempts": 1, "initialDelaySeconds": 1, "maxDelaySeconds": 1},
            "effects": {},
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["revision"] == 2
    assert body["name"] == "renamed"
    assert body["params"] == {"seconds": 2}
    assert body["recurrence"]["timezone"] == "Europe/Paris"
    assert body["misfirePolicy"] == "skip"
    assert body["overlapPolicy"] == "skip"
    assert body["nextRunAtLocal"][11:16] == "10:30"
    # The edit's answer is the schedule, and what the edit did besides.
    assert body.pop("instantsDiff")["added"] and body.pop("orphanedDirectives") == []
    assert client.get(path).json() == body


def test_patch__requires_expected_revision(client, schedule):
    response = client.patch(f"{SCHEDULES}/{schedule['scheduleId']}", {"name": "x"})
    assert_error(response, 400, "invalid_request", field="expectedRevision")


def test_patch__job_type_cannot_change(client, schedule):
    response = client.patch(f"{SCHEDULES}/{schedule['scheduleId']}", {"expectedRevision": 1, "jobType": "report.sales"})
    assert_error(response, 400, "invalid_request", field="jobType")


def test_patch__stale_revision_conflicts_with_current(client, schedule):
    path = f"{SCHEDULES}/{schedule['scheduleId']}"
    client.patch(path, {"expectedRevision": 1, "name": "first"})
    error = assert_error(client.patch(path, {"expectedRevision": 1, "name": "second"}), 409, "revision_conflict")
    assert error["details"]["current"]["name"] == "first"
    assert error["details"]["current"]["revision"] == 2
    assert client.get(path).json()["name"] == "first"


def test_pause_and_resume(client, schedule):
    path = f"{SCHEDULES}/{schedule['scheduleId']}"
    paused = client.post(f"{path}/pause")
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    assert paused.json()["nextRunAt"] is None
    assert paused.json()["nextRunAtLocal"] is None
    resumed = client.post(f"{path}/resume")
    assert resumed.status_code == 200
    assert resumed.json()["paused"] is False
    assert INSTANT.match(resumed.json()["nextRunAt"])


def test_delete__hides_schedule_but_keeps_history(client, schedule):
    path = f"{SCHEDULES}/{schedule['scheduleId']}"
    run = client.post(f"{path}/runs", {}).json()
    assert client.delete(path).status_code == 204
    assert_error(client.get(path), 404, "not_found")
    assert_error(client.delete(path), 404, "not_found")
    assert client.get(SCHEDULES).json()["results"] == []
    history = client.get(f"{path}/runs")
    assert history.status_code == 200
    assert [r["runId"] for r in history.json()["results"]] == [run["runId"]]
    assert client.get(f"/api/v1/runs/{run['runId']}").status_code == 200


def test_delete__frees_quota(db):
    client = api_client(make_tenant("tiny", max_schedules=1))
    first = create_schedule(client)
    assert client.delete(f"{SCHEDULES}/{first['scheduleId']}").status_code == 204
    create_schedule(client, name="replacement")


def test_preview__dst_gap_fires_shifted_forward(client):
    response = client.post(
        f"{SCHEDULES}/preview",
        {
            "recurrence": {"kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York"},
            "count": 2,
            "after": "2027-03-13T12:00:00Z",
        },
    )
    assert response.status_code == 200, response.content
    instants = response.json()["instants"]
    assert instants[0] == {"at": "2027-03-14T07:30:00Z", "local": "2027-03-14T03:30:00-04:00"}
    assert instants[1] == {"at": "2027-03-15T06:30:00Z", "local": "2027-03-15T02:30:00-04:00"}


def test_preview__defaults_to_five_after_now_and_creates_nothing(client):
    response = client.post(f"{SCHEDULES}/preview", {"recurrence": {"kind": "cron", "cron": "* * * * *"}})
    assert response.status_code == 200
    instants = response.json()["instants"]
    assert len(instants) == 5
    assert parse_instant(instants[0]["at"]) > datetime.now(UTC) - timedelta(seconds=1)
    assert all(INSTANT.match(i["at"]) for i in instants)
    assert client.get(SCHEDULES).json()["results"] == []


@pytest.mark.parametrize("count", [0, 101, "5", 2.5, True])
def test_preview__count_bounds(client, count):
    response = client.post(f"{SCHEDULES}/preview", {"recurrence": {"kind": "cron", "cron": "* * * * *"}, "count": count})
    assert_error(response, 400, "invalid_request", field="count")


def test_preview__is_not_captured_as_a_schedule_id(client):
    assert_error(client.get(f"{SCHEDULES}/preview"), 405, "method_not_allowed")


def test_preview__after_is_exclusive(client):
    response = client.post(
        f"{SCHEDULES}/preview",
        {"recurrence": {"kind": "cron", "cron": "0 * * * *"}, "count": 2, "after": "2026-01-01T10:00:00Z"},
    )
    assert [i["at"] for i in response.json()["instants"]] == ["2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"]


def test_preview__fall_back_fires_once_at_first_occurrence(client):
    response = client.post(
        f"{SCHEDULES}/preview",
        {
            "recurrence": {"kind": "cron", "cron": "30 1 * * *", "timezone": "America/New_York"},
            "count": 2,
            "after": "2026-11-01T00:00:00Z",
        },
    )
    instants = response.json()["instants"]
    assert instants[0] == {"at": "2026-11-01T05:30:00Z", "local": "2026-11-01T01:30:00-04:00"}
    assert instants[1] == {"at": "2026-11-02T06:30:00Z", "local": "2026-11-02T01:30:00-05:00"}
