"""Expectations on a schedule (schedule health): stored with the schedule and its revision,
replaced by an edit, removed by null; hostile values are 400 on the field, and nothing
already accepted changes."""

import pytest

from tests.api.conftest import CRON_BODY, assert_error, create_schedule

SCHEDULES = "/api/v1/schedules"
EXPECTATIONS = {
    "startWithinSeconds": 120,
    "finishWithinSeconds": 600,
    "maxConsecutiveFailures": 3,
    "alert": {"email": {"to": ["ops@example.com"]}, "webhook": {"url": "https://hooks.example.com/health"}},
}


@pytest.fixture(autouse=True)
def _db(db):
    return db


def test_create__stores_and_answers_expectations(client):
    created = create_schedule(client, expectations=EXPECTATIONS)
    assert created["expectations"] == EXPECTATIONS
    fetched = client.get(f"{SCHEDULES}/{created['scheduleId']}").json()
    assert fetched["expectations"] == EXPECTATIONS
    revisions = client.get(f"{SCHEDULES}/{created['scheduleId']}/revisions").json()["results"]
    assert revisions[0]["expectations"] == EXPECTATIONS
    from schedules.models import Schedule

    row = Schedule.objects.get(id=created["scheduleId"])
    assert (row.expect_start_within_seconds, row.expect_finish_within_seconds,
            row.expect_max_consecutive_failures) == (120, 600, 3)


def test_create__without_expectations_answers_null(client):
    assert create_schedule(client)["expectations"] is None


def test_edit__replaces_then_null_removes_them(client):
    created = create_schedule(client, expectations=EXPECTATIONS)
    path = f"{SCHEDULES}/{created['scheduleId']}"
    edited = client.patch(path, {"expectedRevision": 1, "expectations": {"startWithinSeconds": 30}}).json()
    assert edited["expectations"] == {"startWithinSeconds": 30}
    cleared = client.patch(path, {"expectedRevision": 2, "expectations": None}).json()
    assert cleared["expectations"] is None
    from schedules.models import Schedule

    row = Schedule.objects.get(id=created["scheduleId"])
    assert row.expectations is None and row.expect_start_within_seconds is None
    # An edit of another field keeps them.
    client.patch(path, {"expectedRevision": 3, "expectations": {"maxConsecutiveFailures": 2}})
    kept = client.patch(path, {"expectedRevision": 4, "name": "renamed"}).json()
    assert kept["expectations"] == {"maxConsecutiveFailures": 2}


HOSTILE = [
    ({"startWithinSeconds": 0}, "expectations.startWithinSeconds"),
    ({"startWithinSeconds": -5}, "expectations.startWithinSeconds"),
    ({"startWithinSeconds": 10**9}, "expectations.startWithinSeconds"),
    ({"finishWithinSeconds": 0}, "expectations.finishWithinSeconds"),
    ({"finishWithinSeconds": 10**9}, "expectations.finishWithinSeconds"),
    ({"finishWithinSeconds": "60"}, "expectations.finishWithinSeconds"),
    ({"maxConsecutiveFailures": 0}, "expectations.maxConsecutiveFailures"),
    ({"maxConsecutiveFailures": 10**9}, "expectations.maxConsecutiveFailures"),
    ({"maxConsecutiveFailures": True}, "expectations.maxConsecutiveFailures"),
    ({"startWithinSeconds": 60, "alert": {"email": {"to": [f"u{i}@example.com" for i in range(1000)]}}},
     "expectations.alert.email.to"),
    ({"startWithinSeconds": 60, "alert": {"webhook": {"url": "http://10.0.0.5/hook"}}},
     "expectations.alert.webhook.url"),
    ({"startWithinSeconds": 60, "alert": {"webhook": {"url": "http://169.254.169.254/latest"}}},
     "expectations.alert.webhook.url"),
    ({"startWithinSeconds": 60, "alert": {"webhook": {"url": "http://localhost:8080/"}}},
     "expectations.alert.webhook.url"),
    ({"startWithinSeconds": 60, "alert": {"email": {"to": ["a@[127.0.0.1]"]}}}, "expectations.alert.email.to.0"),
    ({"startWithinSeconds": 60, "alert": {"email": {"to": ["a@example.com"], "attach": True}}},
     "expectations.alert.email.attach"),
    ({"startWithinSeconds": 60, "alert": {"pager": {}}}, "expectations.alert.pager"),
    ({"startWithinSeconds": 60, "surprise": 1}, "expectations.surprise"),
    ({"alert": {"email": {"to": ["a@example.com"]}}}, "expectations"),
    ({}, "expectations"),
]


@pytest.mark.parametrize("expectations,field", HOSTILE)
def test_create__hostile_expectations_are_400_on_the_field(client, expectations, field):
    response = client.post(SCHEDULES, {**CRON_BODY, "expectations": expectations})
    assert_error(response, 400, "invalid_request", field=field)
    from schedules.models import Schedule

    assert not Schedule.objects.exists()


@pytest.mark.parametrize("expectations,field", HOSTILE[:4])
def test_edit__hostile_expectations_change_nothing(client, expectations, field):
    created = create_schedule(client, expectations=EXPECTATIONS)
    path = f"{SCHEDULES}/{created['scheduleId']}"
    assert_error(client.patch(path, {"expectedRevision": 1, "expectations": expectations}), 400,
                 "invalid_request", field=field)
    assert client.get(path).json()["expectations"] == EXPECTATIONS


def test_expectations_as_an_array_are_400(client):
    assert_error(client.post(SCHEDULES, {**CRON_BODY, "expectations": [1]}), 400, "invalid_request",
                 field="expectations")
