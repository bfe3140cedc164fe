"""Admission keeps the promises already made: a strict schedule is refused (409
deadline_infeasible) when it would push an existing strict schedule past that schedule's
own deadline at p99 in a wave they share, even though it meets its own.

The numbers: 10 live short slots, demo.sleep without history (5 s a run), a 09:00 wave of 28
strict schedules with a loose promise (a day) of the same tenant: the claim serves strict runs
first, so only strict work delays a strict run. The existing strict schedule S (deadline 10 s)
is served last of the tenant's 29 strict runs: 10 start at 0, 10 at 5, 9 at 10, and S by 10 s.
A newcomer at 09:00 makes 30 runs: S by 15 s."""

import pytest

from runs.capacity.live import slots_report
from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, assert_error
from tests.api.test_capacity_api import DAILY_9, LOOSE, _strict, _wave


@pytest.fixture
def wave_with_promise(client):
    """The 09:00 wave and S, admitted within its 10 s deadline."""
    slots_report("embedded:test:1", {"short": 10})
    _wave(client, 28, **LOOSE)
    response = client.post("/api/v1/schedules", {**CRON_BODY, "name": "S", "recurrence": DAILY_9,
                                                 "startDeadlineSeconds": 10})
    assert response.status_code == 201, response.content
    return response.json()


def test_strict_newcomer_meeting_its_own_deadline_but_breaking_another__is_409_naming_it(client, wave_with_promise):
    error = assert_error(_strict(client, startDeadlineSeconds=60), 409, "deadline_infeasible")
    details = error["details"]
    assert details["predictedP99Seconds"] == 15  # its own promise (60 s) would be kept
    assert details["breaks"] == {"scheduleId": wave_with_promise["scheduleId"], "instant": details["instant"],
                                 "startDeadlineSeconds": 10, "predictedP99Seconds": 15.0}
    assert details["instant"].endswith("T09:00:00Z")
    assert details["slotsNeeded"] == 11  # 11 slots start S by 10 s again
    assert wave_with_promise["scheduleId"] in error["message"]
    assert not Schedule.objects.filter(name="strict").exists()


def test_breaking_refusal__another_tenants_schedule_is_not_named(client, other_client):
    """Another tenant's S, due a second after this tenant's eight ordinary runs took eight of the
    ten slots, starts at once (its run on the ninth; the occurrence it stands for, served after
    it, on the tenth). A strict newcomer of this tenant due with the eight takes a slot first
    (strict runs first), so S waits 4 s for the second: past its 3 s."""
    _wave(client, 8)
    slots_report("embedded:test:1", {"short": 10})
    nine = client.get("/api/v1/schedules", {"limit": 1}).json()["results"][0]["nextRunAt"]
    second_later = nine.replace(":00Z", ":01Z")
    theirs = other_client.post("/api/v1/schedules", {
        **CRON_BODY, "name": "S", "recurrence": {"kind": "interval", "everySeconds": 86400, "anchor": second_later},
        "startDeadlineSeconds": 3})
    assert theirs.status_code == 201, theirs.content
    error = assert_error(_strict(client, startDeadlineSeconds=60), 409, "deadline_infeasible")
    assert error["details"]["predictedP99Seconds"] == 0  # its own promise is kept
    assert error["details"]["breaks"] == {"scheduleId": None, "instant": second_later, "startDeadlineSeconds": 3,
                                          "predictedP99Seconds": 4.0}
    assert theirs.json()["scheduleId"] not in error["message"] and "another tenant" in error["message"]


def test_editing_into_a_strict_promise_that_breaks_another__is_409_and_the_suggested_jitter_is_admitted(
        client, wave_with_promise):
    newcomer = _strict(client).json()  # ordinary: never refused, though it makes S late
    url = f"/api/v1/schedules/{newcomer['scheduleId']}"
    error = assert_error(client.patch(url, {"expectedRevision": 1, "startDeadlineSeconds": 60}), 409,
                         "deadline_infeasible")
    assert error["details"]["breaks"]["scheduleId"] == wave_with_promise["scheduleId"]
    assert client.get(url).json()["revision"] == 1
    # The suggestion holds for this schedule: its runs fall where its id draws them with that jitter.
    jitter = error["details"]["suggestedJitterSeconds"]
    assert jitter is not None
    response = client.patch(url, {"expectedRevision": 1, "startDeadlineSeconds": 60, "jitterSeconds": jitter})
    assert response.status_code == 200, response.content


def test_more_slots_than_needed__both_promises_are_admitted(client, wave_with_promise):
    slots_report("embedded:test:1", {"short": 11})
    assert _strict(client, startDeadlineSeconds=60).status_code == 201


def test_a_promise_already_missed_without_the_newcomer__does_not_refuse_it(client, wave_with_promise):
    """Capacity left after S was admitted: S misses its 10 s without the newcomer too, so the
    newcomer does not push it past: only its own deadline counts."""
    slots_report("embedded:test:1", {"short": 9})
    assert _strict(client, startDeadlineSeconds=60).status_code == 201


def test_a_promise_of_another_class_or_another_minute__is_not_shared(client, wave_with_promise):
    elsewhere = {**CRON_BODY, "name": "strict", "recurrence": {"kind": "cron", "cron": "0 10 * * *"},
                 "startDeadlineSeconds": 60}
    assert client.post("/api/v1/schedules", elsewhere).status_code == 201
    long_class = {**CRON_BODY, "name": "long", "jobType": "demo.export", "params": {"seconds": 0},
                  "recurrence": DAILY_9, "startDeadlineSeconds": 60}
    slots_report("embedded:test:2", {"long": 1})
    assert client.post("/api/v1/schedules", long_class).status_code == 201
