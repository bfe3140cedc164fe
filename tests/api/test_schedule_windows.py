"""Windows (activeFrom, activeUntil, endAfterOccurrences) and RRULE schedules through the
API and the materializer, on the database under test (PostgreSQL or the embedded SQLite)."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection

from runs import authority
from runs.models import Run, Trigger
from runs.timers import Timers, fire
from schedules.models import Schedule
from kernel.clock import authority_now, instant
from tests.api.conftest import CRON_BODY, create_schedule, run_once

pytestmark = pytest.mark.django_db

EVERY_MINUTE = {"kind": "interval", "everySeconds": 60, "anchor": "2020-01-01T00:00:00Z"}


def get(client, schedule_id):
    response = client.get(f"/api/v1/schedules/{schedule_id}")
    assert response.status_code == 200, response.content
    return response.json()


def patch(client, schedule, **changes):
    response = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}",
                            {"expectedRevision": schedule["revision"], **changes})
    return response


def overdue(schedule_id, minutes):
    """Time passes: the schedule's next instant (a whole minute) was `minutes` ago (the
    scanner was away)."""
    at = (authority_now() - timedelta(minutes=minutes)).replace(second=0, microsecond=0)
    Schedule.objects.filter(id=schedule_id).update(next_run_at=at)
    return at


def scan_until_idle():
    for _ in range(50):
        if not authority.materialize_due().schedules:
            return
    raise AssertionError("still materializing")


def scheduled_runs(schedule_id):
    return list(Run.objects.filter(schedule_id=schedule_id, trigger=Trigger.SCHEDULE, backfilled=False)
                .order_by("scheduled_at").values_list("scheduled_at", flat=True))


# --------------------------------------------------------------------------------------
# RRULE through the API
# --------------------------------------------------------------------------------------

RRULE = {"kind": "rrule", "rrule": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0", "dtstart": "2027-01-01T00:00:00",
         "timezone": "Europe/London", "exdates": ["2027-12-31T17:00:00"], "rdates": []}


def test_rrule_schedule__create_get_preview_and_patch_round_trip(client):
    schedule = create_schedule(client, recurrence=RRULE)
    assert schedule["recurrence"] == RRULE
    assert schedule["nextRunAt"] == "2027-01-29T17:00:00Z" and schedule["nextRunAtLocal"] == "2027-01-29T17:00:00+00:00"
    assert schedule["ended"] is False

    preview = client.post("/api/v1/schedules/preview", {"recurrence": RRULE, "after": "2027-03-27T00:00:00Z",
                                                        "count": 2}).json()
    assert preview["instants"] == [{"at": "2027-04-30T16:00:00Z", "local": "2027-04-30T17:00:00+01:00"},
                                   {"at": "2027-05-28T16:00:00Z", "local": "2027-05-28T17:00:00+01:00"}]
    instants = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview?after=2027-11-01T00:00:00Z&count=2")
    assert [i["at"] for i in instants.json()["instants"]] == ["2027-11-26T17:00:00Z", "2028-01-28T17:00:00Z"]

    weekly = {**RRULE, "rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;COUNT=2", "exdates": []}
    response = patch(client, schedule, recurrence=weekly)
    assert response.status_code == 200, response.content
    assert response.json()["recurrence"]["rrule"] == "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;COUNT=2"
    assert response.json()["nextRunAt"] == "2027-01-04T09:00:00Z"


@pytest.mark.parametrize("recurrence,field", [
    ({**RRULE, "rrule": "RRULE:FREQ=DAILY"}, "recurrence.rrule"),
    ({**RRULE, "rrule": "FREQ=DAILY;COUNT=1000000000"}, "recurrence.rrule"),
    ({**RRULE, "rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}, "recurrence.rrule"),
    ({**RRULE, "dtstart": "2027-01-01T00:00:00Z"}, "recurrence.dtstart"),
    ({**RRULE, "exdates": ["x"] * 1001}, "recurrence.exdates"),
    ({**RRULE, "rdates": "2027-01-01T00:00:00"}, "recurrence.rdates"),
])
def test_rrule_schedule__hostile_rule__400_invalid_recurrence_with_the_field(client, recurrence, field):
    for path, body in (("/api/v1/schedules", {**CRON_BODY, "recurrence": recurrence}),
                       ("/api/v1/schedules/preview", {"recurrence": recurrence})):
        response = client.post(path, body)
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("invalid_recurrence", field)
    assert not Schedule.objects.exists()


# --------------------------------------------------------------------------------------
# Windows through the API
# --------------------------------------------------------------------------------------


def test_window__preview_and_create_start_at_active_from(client):
    window = {"activeFrom": "2030-01-01T00:30:00Z", "activeUntil": "2030-01-01T02:00:00Z"}
    hourly = {"kind": "cron", "cron": "0 * * * *", "timezone": "UTC"}
    preview = client.post("/api/v1/schedules/preview", {"recurrence": hourly, "count": 5, **window}).json()
    assert [i["at"] for i in preview["instants"]] == ["2030-01-01T01:00:00Z", "2030-01-01T02:00:00Z"]

    schedule = create_schedule(client, recurrence=hourly, **window)
    assert (schedule["nextRunAt"], schedule["activeFrom"], schedule["activeUntil"]) == (
        "2030-01-01T01:00:00Z", "2030-01-01T00:30:00Z", "2030-01-01T02:00:00Z")
    assert schedule["ended"] is False and schedule["endAfterOccurrences"] is None


def test_window__created_past_its_end__ended_without_next_run(client):
    schedule = create_schedule(client, activeUntil="2020-01-01T00:00:00Z")
    assert (schedule["ended"], schedule["nextRunAt"]) == (True, None)
    assert get(client, schedule["scheduleId"])["ended"] is True


def test_window__patch_ends_then_revives_the_schedule(client):
    schedule = create_schedule(client)
    ended = patch(client, schedule, activeUntil="2020-01-01T00:00:00Z").json()
    assert (ended["ended"], ended["nextRunAt"], ended["revision"]) == (True, None, 2)

    revived = patch(client, ended, activeUntil=None).json()
    assert revived["ended"] is False and revived["nextRunAt"] is not None and revived["activeUntil"] is None

    counted = patch(client, revived, endAfterOccurrences=2).json()
    assert counted["endAfterOccurrences"] == 2 and counted["nextRunAt"] == revived["nextRunAt"]
    revisions = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/revisions").json()["results"]
    assert [r["activeUntil"] for r in revisions] == [None, None, "2020-01-01T00:00:00Z", None]
    assert revisions[0]["endAfterOccurrences"] == 2


@pytest.mark.parametrize("body,field", [
    ({"activeFrom": "2030-01-02T00:00:00Z", "activeUntil": "2030-01-01T00:00:00Z"}, "activeUntil"),
    ({"activeFrom": "2030-01-01T00:00:00Z", "activeUntil": "2030-01-01T00:00:00Z"}, "activeUntil"),
    ({"activeFrom": "tomorrow"}, "activeFrom"),
    ({"activeFrom": "2030-01-01T00:00:00"}, "activeFrom"),
    ({"activeUntil": "+10000-01-01T00:00:00Z"}, "activeUntil"),
    ({"activeUntil": 1893456000}, "activeUntil"),
    ({"endAfterOccurrences": 0}, "endAfterOccurrences"),
    ({"endAfterOccurrences": 10**12}, "endAfterOccurrences"),
    ({"endAfterOccurrences": True}, "endAfterOccurrences"),
    ({"endAfterOccurrences": "3"}, "endAfterOccurrences"),
])
def test_window__hostile_values__400_with_the_field(client, body, field):
    response = client.post("/api/v1/schedules", {**CRON_BODY, **body})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["field"] == field
    assert not Schedule.objects.exists()


def test_window__patch_inverting_the_stored_window__400(client):
    schedule = create_schedule(client, activeFrom="2030-01-01T00:00:00Z")
    response = patch(client, schedule, activeUntil="2029-01-01T00:00:00Z")
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "activeUntil"
    preview = client.post("/api/v1/schedules/preview", {"recurrence": CRON_BODY["recurrence"],
                                                        "activeFrom": "2030-01-01T00:00:00Z",
                                                        "activeUntil": "2029-01-01T00:00:00Z"})
    assert preview.status_code == 400 and preview.json()["error"]["details"]["field"] == "activeUntil"


# --------------------------------------------------------------------------------------
# The materializer honours them
# --------------------------------------------------------------------------------------


def test_end_after_occurrences__scanner_materializes_exactly_n_then_ended(client):
    schedule = create_schedule(client, recurrence=EVERY_MINUTE, misfirePolicy="run_all", overlapPolicy="allow",
                               endAfterOccurrences=3)
    run_once(client, schedule["scheduleId"])  # a manual run is not counted
    first = overdue(schedule["scheduleId"], 10)

    scan_until_idle()

    assert scheduled_runs(schedule["scheduleId"]) == [first + timedelta(minutes=k) for k in range(3)]
    shown = get(client, schedule["scheduleId"])
    assert (shown["occurrencesMaterialized"], shown["ended"], shown["nextRunAt"]) == (3, True, None)
    instants = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview").json()["instants"]
    assert instants == []
    more = patch(client, shown, endAfterOccurrences=5).json()  # revived by raising the count
    assert more["ended"] is False and more["nextRunAt"] is not None
    instants = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/preview?count=10").json()["instants"]
    assert len(instants) == 2


def test_end_after_occurrences__skipped_instants_count_too(client):
    schedule = create_schedule(client, recurrence=EVERY_MINUTE, misfirePolicy="latest_only", endAfterOccurrences=4)
    overdue(schedule["scheduleId"], 10)

    scan_until_idle()

    runs = Run.objects.filter(schedule_id=schedule["scheduleId"])
    assert sum(run.skipped_count or 1 for run in runs) == 4  # 3 missed and skipped, the 4th run
    assert get(client, schedule["scheduleId"])["ended"] is True


def test_active_until__no_occurrence_after_it(client):
    until = authority_now() - timedelta(minutes=4, seconds=30)
    schedule = create_schedule(client, recurrence=EVERY_MINUTE, misfirePolicy="run_all", overlapPolicy="allow",
                               activeUntil=instant(until))
    assert schedule["ended"] is True
    first = overdue(schedule["scheduleId"], 10)  # as if it had been due before the window closed

    scan_until_idle()

    runs = scheduled_runs(schedule["scheduleId"])
    assert runs == [first + timedelta(minutes=k) for k in range(len(runs))] and max(runs) <= until
    assert until - max(runs) < timedelta(minutes=1)
    assert Schedule.objects.get(id=schedule["scheduleId"]).next_run_at is None


def test_active_from__an_instant_before_it_is_not_materialized(client):
    start = authority_now() + timedelta(hours=1)
    schedule = create_schedule(client, recurrence=EVERY_MINUTE, activeFrom=instant(start))
    assert schedule["nextRunAt"] >= instant(start)
    overdue(schedule["scheduleId"], 2)  # a stale next instant, before the window opens

    authority.materialize_due()

    assert scheduled_runs(schedule["scheduleId"]) == []
    assert Schedule.objects.get(id=schedule["scheduleId"]).next_run_at >= start


def test_rrule_schedule__scanner_materializes_its_instants_until_its_end(client):
    start = (authority_now() - timedelta(hours=1)).replace(second=0, microsecond=0, tzinfo=None)
    recurrence = {"kind": "rrule", "rrule": "FREQ=SECONDLY;INTERVAL=30", "dtstart": start.isoformat(),
                  "timezone": "UTC"}
    schedule = create_schedule(client, recurrence=recurrence, misfirePolicy="run_all", overlapPolicy="allow",
                               endAfterOccurrences=5)
    first = overdue(schedule["scheduleId"], 10)  # a whole minute: an instant of the rule

    scan_until_idle()

    assert scheduled_runs(schedule["scheduleId"]) == [first + timedelta(seconds=30 * k) for k in range(5)]
    assert get(client, schedule["scheduleId"])["ended"] is True


@pytest.mark.skipif(connection.vendor != "postgresql", reason="armed timers fire on PostgreSQL only")
def test_end_after_occurrences__armed_timer_counts_in_its_guarded_write(client):
    schedule = create_schedule(client, overlapPolicy="allow", endAfterOccurrences=1)
    at = authority_now() + timedelta(seconds=0.4)
    Schedule.objects.filter(id=schedule["scheduleId"]).update(next_run_at=at)
    timers = Timers()
    timers.load(range(settings.DUE_BUCKETS))
    assert schedule["scheduleId"] in timers.armed
    time.sleep(timers.seconds_to_next() or 0)

    fire(timers, timers.pop_due())

    assert scheduled_runs(schedule["scheduleId"]) == [at]
    stored = Schedule.objects.get(id=schedule["scheduleId"])
    assert (stored.occurrences_materialized, stored.next_run_at) == (1, None)


# --------------------------------------------------------------------------------------
# Shadow mode: python-dateutil's own zoned expansion as the candidate
# --------------------------------------------------------------------------------------


def test_shadow_dateutil__rrule_and_window_ends_agree__nothing_recorded(client, settings):
    from io import StringIO

    from django.core.management import call_command

    from schedules.models import ShadowDisagreement

    settings.RECURRENCE_ENGINE = "shadow:dateutil"
    start = (authority_now() - timedelta(hours=1)).replace(second=0, microsecond=0, tzinfo=None)
    recurrence = {"kind": "rrule", "rrule": "FREQ=MINUTELY", "dtstart": start.isoformat(), "timezone": "UTC"}
    counted = create_schedule(client, name="counted", recurrence=recurrence, misfirePolicy="run_all",
                              overlapPolicy="allow", endAfterOccurrences=3)
    windowed = create_schedule(client, name="windowed", recurrence=recurrence, misfirePolicy="run_all",
                               overlapPolicy="allow", activeUntil=instant(authority_now() - timedelta(minutes=5)))
    overdue(counted["scheduleId"], 10)
    overdue(windowed["scheduleId"], 10)

    scan_until_idle()

    assert len(scheduled_runs(counted["scheduleId"])) == 3 and len(scheduled_runs(windowed["scheduleId"])) >= 4
    assert not ShadowDisagreement.objects.exists()
    out = StringIO()
    call_command("recurrence_shadow", "--candidate", "dateutil", "--days", "0.1", stdout=out)
    assert out.getvalue().splitlines()[-1].startswith("dateutil: 0 mismatches over 2 rules")


# --------------------------------------------------------------------------------------
# The admin: an RRULE rule and a window, through its form
# --------------------------------------------------------------------------------------


def test_admin__rrule_and_window__previewed_created_then_window_cleared(admin_client, tenant):
    from tests.api.test_admin import ADD_URL, add_form, change_form, form_errors, preview_shown

    body = add_form(tenant, recurrence_kind="rrule", cron="", rrule="FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
                    dtstart="2027-01-01T00:00:00", exdates='["2027-12-31T17:00:00"]', rdates="",
                    timezone="Europe/London", active_from="", active_until="2030-01-01 00:00:00",
                    end_after_occurrences="5")
    first = admin_client.post(ADD_URL, body)
    lines = preview_shown(first)
    assert len(lines) == 5 and lines[0].startswith("Fri 2027-01-29 17:00:00 GMT (Europe/London)"), lines

    second = admin_client.post(ADD_URL, change_form(first))
    assert second.status_code == 302, form_errors(second)
    schedule = Schedule.objects.get()
    assert schedule.recurrence["rrule"] == "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17"
    assert (instant(schedule.active_until), schedule.active_from, schedule.end_after_occurrences) == (
        "2030-01-01T00:00:00Z", None, 5)

    url = f"/admin/schedules/schedule/{schedule.id}/change/"
    edited = admin_client.post(url, {**change_form(admin_client.get(url)), "active_until": "",
                                     "end_after_occurrences": "0"})
    assert "end_after_occurrences" in form_errors(edited)  # the API's bounds, named on the form's field
    cleared = admin_client.post(url, {**change_form(admin_client.get(url)), "active_until": ""})
    assert cleared.status_code == 302, form_errors(cleared)
    schedule.refresh_from_db()
    assert (schedule.active_until, schedule.end_after_occurrences, schedule.revision) == (None, 5, 2)


def test_console__an_ended_schedule_says_so(client, admin_client):
    ended = create_schedule(client, name="over", activeUntil="2020-01-01T00:00:00Z")
    active = create_schedule(client, name="on")
    page = admin_client.get(f"/console/schedules/{ended['scheduleId']}/")
    assert page.status_code == 200 and '<span id="paused-state">ended</span>' in page.content.decode()
    page = admin_client.get(f"/console/schedules/{active['scheduleId']}/")
    assert '<span id="paused-state">active</span>' in page.content.decode()
