"""Instants at the ends of datetime's range, any UTC offset, any zone: refused at the edge
(400 on the field) or served, never a 500, and no stored schedule ever breaks a listing."""

from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, assert_error, create_schedule
from tests.extreme_instants import instants, zones
from tests.factories import api_client, make_tenant

SCHEDULES = "/api/v1/schedules"
PREVIEW = "/api/v1/schedules/preview"
def assert_refused_or(response, ok: int, fields: set[str]):
    """`ok`, or 400 invalid_request naming one of `fields`."""
    if response.status_code != ok:
        assert response.status_code == 400, (response.status_code, response.content)
        assert response.json()["error"]["details"].get("field") in fields, response.content


def assert_listing_works(client):
    listing = client.get(SCHEDULES, {"limit": 200})
    assert listing.status_code == 200, listing.content


def test_preview__after_overflowing_with_its_offset_is_400_on_after(client):
    body = {"recurrence": {"kind": "cron", "cron": "* * * * *"}, "after": "0001-01-01T00:00:00+01:00"}
    assert_error(client.post(PREVIEW, body), 400, "invalid_request", field="after")


def test_run_once__run_at_overflowing_with_its_offset_is_400_on_run_at(client, schedule):
    response = client.post(f"{SCHEDULES}/{schedule['scheduleId']}/runs", {"runAt": "0001-01-01T00:00:00+01:00"})
    assert_error(response, 400, "invalid_request", field="runAt")


def test_create__anchor_whose_local_time_overflows_is_refused_and_listing_still_works(client):
    body = {**CRON_BODY, "recurrence": {"kind": "interval", "everySeconds": 60, "anchor": "9999-12-31T23:00:00Z",
                                        "timezone": "Pacific/Kiritimati"}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_request", field="recurrence.anchor")
    assert client.get(SCHEDULES).json()["results"] == []


def test_preview__stops_before_instants_a_zone_cannot_show(client):
    body = {"recurrence": {"kind": "cron", "cron": "0 * * * *", "timezone": "Pacific/Kiritimati"},
            "after": "9999-12-30T20:00:00Z", "count": 10}
    response = client.post(PREVIEW, body)
    assert response.status_code == 200, response.content
    assert [i["at"] for i in response.json()["instants"]] == ["9999-12-30T21:00:00Z", "9999-12-30T22:00:00Z",
                                                             "9999-12-30T23:00:00Z"]


def test_listing__a_stored_row_beyond_any_wall_clock_still_renders(client, schedule):
    """A row written under older, looser rules: the listing shows it with a null local time."""
    Schedule.objects.filter(id=schedule["scheduleId"]).update(
        next_run_at=datetime(9999, 12, 31, 23, tzinfo=timezone.utc),
        recurrence={"kind": "interval", "everySeconds": 60, "anchor": "9999-12-31T23:00:00Z",
                    "timezone": "Pacific/Kiritimati"},
    )
    [listed] = client.get(SCHEDULES).json()["results"]
    assert listed["nextRunAt"] == "9999-12-31T23:00:00Z" and listed["nextRunAtLocal"] is None
    assert client.get(f"{SCHEDULES}/{schedule['scheduleId']}").status_code == 200


# --- Properties ----------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def fuzz_client(db, settings):
    settings.API_RATE_LIMIT_PER_SECOND = 0  # hundreds of requests with one token
    return api_client(make_tenant("extremes", max_schedules=10**6))


@pytest.mark.django_db
@PROPERTY_SETTINGS
@given(after=instants(), zone=zones(), cron=st.booleans())
def test_preview__any_instant_offset_and_zone_is_served_or_refused(fuzz_client, after, zone, cron):
    rule = {"kind": "cron", "cron": "*/30 * * * *"} if cron else {"kind": "interval", "everySeconds": 86400}
    response = fuzz_client.post(PREVIEW, {"recurrence": {**rule, "timezone": zone}, "after": after, "count": 3})
    assert_refused_or(response, 200, {"after"})
    if response.status_code == 200:
        for shown in response.json()["instants"]:
            at = datetime.fromisoformat(shown["at"].replace("Z", "+00:00"))
            assert at > datetime.fromisoformat(after.replace("Z", "+00:00"))
            assert datetime.fromisoformat(shown["local"]) == at


@pytest.mark.django_db
@PROPERTY_SETTINGS
@given(anchor=instants(), zone=zones(), every=st.sampled_from([1, 3600, 10 * 366 * 86400]))
def test_create__any_anchor_and_zone_is_stored_or_refused_and_listings_never_fail(fuzz_client, anchor, zone, every):
    body = {**CRON_BODY, "recurrence": {"kind": "interval", "everySeconds": every, "anchor": anchor,
                                        "timezone": zone}}
    assert_refused_or(fuzz_client.post(SCHEDULES, body), 201, {"recurrence.anchor"})
    assert_listing_works(fuzz_client)


@pytest.mark.django_db
@PROPERTY_SETTINGS
@given(run_at=instants())
def test_run_once__any_run_at_is_accepted_or_refused_and_history_never_fails(fuzz_client, run_at):
    schedule = create_schedule(fuzz_client, name=f"once-{run_at}")
    response = fuzz_client.post(f"{SCHEDULES}/{schedule['scheduleId']}/runs", {"runAt": run_at})
    assert_refused_or(response, 201, {"runAt"})
    history = fuzz_client.get(f"{SCHEDULES}/{schedule['scheduleId']}/runs")
    assert history.status_code == 200, history.content


def test_instants_strategy__reaches_both_ends_of_the_range():
    """The generator really produces the instants this file is about."""
    seen = set()

    @settings(max_examples=200, derandomize=True)
    @given(instants())
    def collect(text):
        seen.add(text[:4])

    collect()
    assert {"0001", "9999"} <= seen


