"""Calendars through the API, the schedule's `calendar` field, preview, the materializer and
a calendar edit recomputing nextRunAt, on the database under test."""

import re
from datetime import datetime, timedelta, timezone

import pytest

from kernel.clock import authority_now, instant
from runs import authority
from runs.models import Run, Trigger
from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, create_schedule, post_raw

pytestmark = pytest.mark.django_db
UTC = timezone.utc
ICS = b"""BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VEVENT\r
UID:1\r
DTSTART;VALUE=DATE:20271225\r
DTEND;VALUE=DATE:20271226\r
SUMMARY:Christmas\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:2\r
DTSTART;VALUE=DATE:20270101\r
RRULE:FREQ=YEARLY;COUNT=3\r
SUMMARY:New year\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:3\r
DTSTART:20270301T090000Z\r
SUMMARY:timed, not a day off\r
END:VEVENT\r
END:VCALENDAR\r
"""


def make_calendar(client, **fields):
    body = {"name": "holidays", "timezone": "UTC", **fields}
    response = client.post("/api/v1/calendars", body)
    assert response.status_code == 201, response.content
    return response.json()


def test_calendar__create_get_list_patch_delete(client):
    made = make_calendar(client, excludeDates=["2027-07-05", "2027-07-05", "2027-01-01"], excludeAnnual=["12-25"],
                         excludeWeekdays=[7, 6])
    assert made["revision"] == 1 and made["calendarId"].startswith("cal")
    assert made["excludeDates"] == ["2027-01-01", "2027-07-05"] and made["excludeWeekdays"] == [6, 7]
    calendar_id = made["calendarId"]
    assert client.get(f"/api/v1/calendars/{calendar_id}").json()["excludeAnnual"] == ["12-25"]
    assert [c["calendarId"] for c in client.get("/api/v1/calendars").json()["results"]] == [calendar_id]
    stale = client.patch(f"/api/v1/calendars/{calendar_id}", {"expectedRevision": 7, "excludeDates": []})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "revision_conflict"
    assert stale.json()["error"]["details"]["current"]["revision"] == 1
    edited = client.patch(f"/api/v1/calendars/{calendar_id}", {"expectedRevision": 1, "excludeDates": []})
    assert edited.status_code == 200 and edited.json()["revision"] == 2 and edited.json()["excludeDates"] == []
    revisions = client.get(f"/api/v1/calendars/{calendar_id}/revisions").json()["results"]
    assert [(r["revision"], r["excludeDates"], r["authorKind"]) for r in revisions] == [
        (2, [], "api"), (1, ["2027-01-01", "2027-07-05"], "api")]
    assert client.delete(f"/api/v1/calendars/{calendar_id}").status_code == 204
    assert client.get(f"/api/v1/calendars/{calendar_id}").status_code == 404


def test_calendar__other_tenants_calendar_is_404(client, other_client):
    calendar_id = make_calendar(other_client)["calendarId"]
    assert client.get(f"/api/v1/calendars/{calendar_id}").status_code == 404
    assert client.patch(f"/api/v1/calendars/{calendar_id}", {"expectedRevision": 1}).status_code == 404
    assert client.delete(f"/api/v1/calendars/{calendar_id}").status_code == 404
    assert client.get(f"/api/v1/calendars/{calendar_id}/revisions").status_code == 404
    assert post_raw(client, f"/api/v1/calendars/{calendar_id}/import", ICS, content_type="text/calendar").status_code == 404
    response = client.post("/api/v1/schedules", {**CRON_BODY, "calendar": {"calendarIds": [calendar_id]}})
    assert response.status_code == 404, response.content
    preview = client.post("/api/v1/schedules/preview", {"recurrence": CRON_BODY["recurrence"],
                                                        "calendar": {"calendarIds": [calendar_id]}})
    assert preview.status_code == 404


@pytest.mark.parametrize("body, field", [
    ({"excludeDates": ["2027-02-30"]}, "excludeDates"),
    ({"excludeDates": "2027-01-01"}, "excludeDates"),
    ({"excludeDates": [f"2027-01-{d:02d}" for d in range(1, 29)] * 400}, "excludeDates"),  # 11,200 dates
    ({"excludeAnnual": ["13-01"]}, "excludeAnnual"),
    ({"excludeWeekdays": [0]}, "excludeWeekdays"),
    ({"excludeWeekdays": [True]}, "excludeWeekdays"),
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"name": ""}, "name"),
    ({"colour": "red"}, "colour"),
])
def test_calendar__hostile_fields__400_with_the_field(client, body, field):
    response = client.post("/api/v1/calendars", {"name": "x", **body})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["field"] == field


def test_calendar__100000_dates__4xx_and_nothing_stored(client):
    dates = [(datetime(2000, 1, 1) + timedelta(days=k)).date().isoformat() for k in range(100_000)]
    response = client.post("/api/v1/calendars", {"name": "x", "excludeDates": dates})
    assert 400 <= response.status_code < 500
    assert client.get("/api/v1/calendars").json()["results"] == []


@pytest.mark.parametrize("policy", ["skip", "shift_before", "shift_after"])
def test_calendar__dates_in_years_1_and_9999_are_accepted_and_previews_stay_bounded(client, policy):
    calendar_id = make_calendar(client, excludeDates=["0001-01-02", "0001-01-03", "9999-12-30", "9999-12-31"],
                                timezone="Pacific/Kiritimati")["calendarId"]
    for after, zone in (("9999-12-28T00:00:00Z", "Pacific/Kiritimati"), ("0001-01-02T00:00:00Z", "Etc/GMT+12")):
        for recurrence_ in ({"kind": "cron", "cron": "0 9 * * *", "timezone": zone},
                            {"kind": "business_day", "days": [1, -1], "at": "09:00", "timezone": zone,
                             "calendarIds": [calendar_id]}):
            response = client.post("/api/v1/schedules/preview", {
                "recurrence": recurrence_, "after": after, "includeExcluded": True,
                "calendar": {"calendarIds": [calendar_id], "policy": policy}, "count": 5})
            assert response.status_code == 200, (after, recurrence_, response.content)


def test_calendar__ics_import_adds_all_day_events(client):
    calendar_id = make_calendar(client, excludeDates=["2027-07-05"])["calendarId"]
    response = post_raw(client, f"/api/v1/calendars/{calendar_id}/import", ICS, content_type="text/calendar")
    assert response.status_code == 200, response.content
    assert response.json()["excludeDates"] == ["2027-01-01", "2027-07-05", "2027-12-25", "2028-01-01", "2029-01-01"]
    assert response.json()["revision"] == 2


@pytest.mark.parametrize("body", [b"not a calendar", b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:2027\r\n"
                                  b"END:VEVENT\r\nEND:VCALENDAR\r\n", b"\xff\xfe"])
def test_calendar__bad_ics__400_nothing_changed(client, body):
    calendar_id = make_calendar(client, excludeDates=["2027-07-05"])["calendarId"]
    response = post_raw(client, f"/api/v1/calendars/{calendar_id}/import", body, content_type="text/calendar")
    assert response.status_code == 400, response.content
    assert client.get(f"/api/v1/calendars/{calendar_id}").json()["revision"] == 1


def test_calendar__delete_while_used__409(client):
    calendar_id = make_calendar(client)["calendarId"]
    create_schedule(client, calendar={"calendarIds": [calendar_id], "policy": "skip"})
    response = client.delete(f"/api/v1/calendars/{calendar_id}")
    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"


def test_preview__shifted_from_and_include_excluded(client):
    calendar_id = make_calendar(client, excludeDates=["2027-07-05"])["calendarId"]  # a Monday
    body = {"recurrence": {"kind": "cron", "cron": "0 9 * * 1", "timezone": "UTC"}, "after": "2027-06-29T00:00:00Z",
            "count": 3, "calendar": {"calendarIds": [calendar_id], "policy": "shift_before"}, "includeExcluded": True}
    response = client.post("/api/v1/schedules/preview", body)
    assert response.status_code == 200, response.content
    assert response.json()["instants"] == [
        {"at": "2027-07-02T09:00:00Z", "local": "2027-07-02T09:00:00+00:00", "shiftedFrom": "2027-07-05T09:00:00Z"},
        {"at": "2027-07-05T09:00:00Z", "local": "2027-07-05T09:00:00+00:00", "excluded": calendar_id},
        {"at": "2027-07-12T09:00:00Z", "local": "2027-07-12T09:00:00+00:00"},
    ]


def test_business_day_kind__through_the_api(client):
    calendar_id = make_calendar(client, timezone="America/New_York", excludeDates=["2027-07-05"])["calendarId"]
    body = {"recurrence": {"kind": "business_day", "days": [3], "at": "09:00", "timezone": "America/New_York",
                           "calendarIds": [calendar_id]}, "after": "2027-07-01T00:00:00Z", "count": 1}
    response = client.post("/api/v1/schedules/preview", body)
    assert response.status_code == 200, response.content
    assert response.json()["instants"][0]["at"] == "2027-07-06T13:00:00Z"
    created = create_schedule(client, recurrence=body["recurrence"])
    assert created["recurrence"]["kind"] == "business_day"
    assert client.delete(f"/api/v1/calendars/{calendar_id}").status_code == 409


def scan_until_idle():
    for _ in range(50):
        if not authority.materialize_due().schedules:
            return
    raise AssertionError("still materializing")


def _monday_schedule(client, calendar_id, policy):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * 1", "timezone": "UTC"},
                               misfirePolicy="run_all", overlapPolicy="allow",
                               calendar={"calendarIds": [calendar_id], "policy": policy})
    # The scanner was away since before Monday 2026-11-02.
    Schedule.objects.filter(id=schedule["scheduleId"]).update(
        next_run_from=datetime(2026, 11, 1, tzinfo=UTC), next_run_at=datetime(2026, 11, 2, 9, tzinfo=UTC))
    return schedule["scheduleId"]


def test_materialize__excluded_instant_is_a_skipped_run_with_reason_calendar(client):
    calendar_id = make_calendar(client, excludeDates=["2026-11-09"])["calendarId"]
    schedule_id = _monday_schedule(client, calendar_id, "skip")
    scan_until_idle()
    runs = list(Run.objects.filter(schedule_id=schedule_id, trigger=Trigger.SCHEDULE).order_by("scheduled_at")[:3])
    assert [(r.scheduled_at.date().isoformat(), r.state, r.skip_reason) for r in runs][:2] == [
        ("2026-11-02", runs[0].state, None), ("2026-11-09", "skipped", "calendar")]
    assert runs[0].state != "skipped" and runs[2].scheduled_at == datetime(2026, 11, 16, 9, tzinfo=UTC)
    shown = client.get(f"/api/v1/runs/{runs[1].id}").json()
    assert shown["skipReason"] == "calendar"


def test_materialize__moved_instant_carries_shifted_from(client):
    calendar_id = make_calendar(client, excludeDates=["2026-11-09"])["calendarId"]
    schedule_id = _monday_schedule(client, calendar_id, "shift_after")
    scan_until_idle()
    runs = list(Run.objects.filter(schedule_id=schedule_id, trigger=Trigger.SCHEDULE).order_by("scheduled_at")[:3])
    assert [r.scheduled_at for r in runs] == [datetime(2026, 11, 2, 9, tzinfo=UTC), datetime(2026, 11, 10, 9, tzinfo=UTC),
                                              datetime(2026, 11, 16, 9, tzinfo=UTC)]
    assert runs[1].shifted_from == datetime(2026, 11, 9, 9, tzinfo=UTC)
    assert client.get(f"/api/v1/runs/{runs[1].id}").json()["shiftedFrom"] == "2026-11-09T09:00:00Z"
    from django.contrib.auth import get_user_model
    from django.test import Client

    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw"))
    page = staff.get(f"/console/runs/{runs[1].id}/").content.decode()
    assert 'id="run-shifted"' in page and "2026-11-09 09:00" in page
    assert not Run.objects.filter(schedule_id=schedule_id, skip_reason="calendar").exists()


def test_calendar_edit__recomputes_next_run_at_and_keeps_materialized_runs(client):
    calendar_id = make_calendar(client)["calendarId"]
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
                               calendar={"calendarIds": [calendar_id], "policy": "skip"})
    first = datetime.fromisoformat(schedule["nextRunAt"].replace("Z", "+00:00"))
    edited = client.patch(f"/api/v1/calendars/{calendar_id}",
                          {"expectedRevision": 1, "excludeDates": [first.date().isoformat()]})
    assert edited.status_code == 200, edited.content
    shown = client.get(f"/api/v1/schedules/{schedule['scheduleId']}").json()
    assert shown["nextRunAt"] == instant(first + timedelta(days=1))
    client.patch(f"/api/v1/calendars/{calendar_id}", {"expectedRevision": 2, "excludeDates": []})
    assert client.get(f"/api/v1/schedules/{schedule['scheduleId']}").json()["nextRunAt"] == instant(first)
    assert authority_now() < first


def test_schedule_calendar__hostile_values__400(client):
    for calendar, field in [({"calendarIds": "x"}, "calendar.calendarIds"), ({"calendarIds": ["a"], "policy": "x"},
                                                                           "calendar.policy"),
                            ({"calendarIds": ["a"], "more": 1}, "calendar.more"), ("x", "calendar")]:
        response = client.post("/api/v1/schedules", {**CRON_BODY, "calendar": calendar})
        assert response.status_code == 400, response.content
        assert response.json()["error"]["details"]["field"] == field


def test_calendar_recompute__in_batches_leaves_paused_and_runs_alone(client):
    from schedule_services.calendars import calendar_recompute_schedules
    from schedules.models import Calendar

    calendar_id = make_calendar(client)["calendarId"]
    body = {"recurrence": {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
            "calendar": {"calendarIds": [calendar_id], "policy": "skip"}}
    schedules = [create_schedule(client, **body) for _ in range(5)]
    paused = schedules[-1]["scheduleId"]
    assert client.post(f"/api/v1/schedules/{paused}/pause", {}).status_code == 200
    run_ids = set(Run.objects.values_list("id", flat=True))
    first = datetime.fromisoformat(schedules[0]["nextRunAt"].replace("Z", "+00:00"))
    Calendar.objects.filter(id=calendar_id).update(exclude_dates=[first.date().isoformat()])

    assert calendar_recompute_schedules(calendar_id, batch=2) == 4

    moved = dict(Schedule.objects.filter(id__in=[s["scheduleId"] for s in schedules]).values_list("id", "next_run_at"))
    assert [moved[s["scheduleId"]] for s in schedules[:4]] == [first + timedelta(days=1)] * 4
    assert moved[paused] is None
    assert set(Run.objects.values_list("id", flat=True)) == run_ids
    assert calendar_recompute_schedules(calendar_id, batch=2) == 0  # nothing left to change


@pytest.mark.parametrize("rule", [
    {"kind": "cron", "cron": "* * * * * *", "timezone": "UTC"},
    {"kind": "interval", "everySeconds": 30, "anchor": "2027-01-01T00:00:00Z"},
    {"kind": "rrule", "rrule": "FREQ=SECONDLY;INTERVAL=5", "dtstart": "2027-01-01T00:00:00", "timezone": "UTC"},
])
def test_shift_policy__rules_firing_more_than_once_a_minute__400(client, rule):
    calendar_id = make_calendar(client, excludeWeekdays=[6, 7])["calendarId"]
    calendar = {"calendarIds": [calendar_id], "policy": "shift_after"}
    response = client.post("/api/v1/schedules", {**CRON_BODY, "recurrence": rule, "calendar": calendar})
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "calendar.policy"
    preview = client.post("/api/v1/schedules/preview", {"recurrence": rule, "calendar": calendar})
    assert preview.status_code == 400 and preview.json()["error"]["details"]["field"] == "calendar.policy"
    skipping = client.post("/api/v1/schedules/preview", {"recurrence": rule, "calendar": {**calendar, "policy": "skip"}})
    assert skipping.status_code == 200, skipping.content


def test_minutely_rule_shifted_over_a_long_holiday_finds_its_next_instant(client):
    # Every minute; Saturday 2027-07-31 to Tuesday 08-10 excluded (weekends and 9 dates):
    # shift_after moves the holiday's minutes to Wednesday 08-11, where each meets the rule's
    # own minute (one occurrence). Asked from inside the holiday (16,000 minutes of it), the
    # answer is found: the search passes each excluded day at once.
    dates = [f"2027-08-{d:02d}" for d in range(2, 11)]
    calendar_id = make_calendar(client, excludeDates=dates, excludeWeekdays=[6, 7])["calendarId"]
    body = {"recurrence": {"kind": "cron", "cron": "* * * * *", "timezone": "UTC"},
            "calendar": {"calendarIds": [calendar_id], "policy": "shift_after"}, "count": 2,
            "after": "2027-08-05T12:00:00Z"}
    response = client.post("/api/v1/schedules/preview", body)
    assert response.status_code == 200, response.content
    assert response.json()["instants"] == [
        {"at": "2027-08-11T00:00:00Z", "local": "2027-08-11T00:00:00+00:00"},
        {"at": "2027-08-11T00:01:00Z", "local": "2027-08-11T00:01:00+00:00"}]


def test_schedule_patch__adding_a_calendar_recomputes_next_run_and_its_preview_shows_the_move(client):
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"})
    first = datetime.fromisoformat(schedule["nextRunAt"].replace("Z", "+00:00"))
    calendar_id = make_calendar(client, excludeDates=[first.date().isoformat()])["calendarId"]
    edited = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}", {
        "expectedRevision": 1, "calendar": {"calendarIds": [calendar_id], "policy": "skip"}})
    assert edited.status_code == 200, edited.content
    assert edited.json()["nextRunAt"] == instant(first + timedelta(days=1))
    assert edited.json()["calendar"] == {"calendarIds": [calendar_id], "policy": "skip"}
    revisions = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/revisions").json()["results"]
    assert revisions[0]["calendar"] == {"calendarIds": [calendar_id], "policy": "skip"}
    cleared = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}", {"expectedRevision": 2, "calendar": None})
    assert cleared.json()["nextRunAt"] == instant(first) and cleared.json()["calendar"] is None
    assert client.delete(f"/api/v1/calendars/{calendar_id}").status_code == 204


def test_resume__instants_excluded_while_paused_are_recorded_skipped_by_the_calendar(client):
    calendar_id = make_calendar(client, excludeDates=["2026-11-09"])["calendarId"]
    schedule = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * 1", "timezone": "UTC"},
                               misfirePolicy="skip", calendar={"calendarIds": [calendar_id], "policy": "skip"})
    schedule_id = schedule["scheduleId"]
    assert client.post(f"/api/v1/schedules/{schedule_id}/pause", {}).status_code == 200
    Schedule.objects.filter(id=schedule_id).update(resume_from=datetime(2026, 11, 2, 9, tzinfo=UTC),
                                                   next_run_from=datetime(2026, 11, 1, tzinfo=UTC))
    assert client.post(f"/api/v1/schedules/{schedule_id}/resume", {}).status_code == 200
    reasons = dict(Run.objects.filter(schedule_id=schedule_id, scheduled_at__lt=datetime(2026, 11, 24, tzinfo=UTC))
                   .values_list("scheduled_at", "skip_reason"))
    assert reasons == {datetime(2026, 11, 2, 9, tzinfo=UTC): "misfire", datetime(2026, 11, 9, 9, tzinfo=UTC): "calendar",
                       datetime(2026, 11, 16, 9, tzinfo=UTC): "misfire", datetime(2026, 11, 23, 9, tzinfo=UTC): "misfire"}
    assert client.get(f"/api/v1/schedules/{schedule_id}").json()["nextRunAt"] > instant(authority_now())


def test_materialize__business_day_schedule_runs_its_days(client):
    calendar_id = make_calendar(client, excludeDates=["2026-10-30"])["calendarId"]  # a Friday
    schedule = create_schedule(client, recurrence={"kind": "business_day", "days": [-1], "at": "17:00",
                                                   "timezone": "UTC", "calendarIds": [calendar_id]},
                               misfirePolicy="run_all", overlapPolicy="allow")
    Schedule.objects.filter(id=schedule["scheduleId"]).update(next_run_at=datetime(2026, 9, 30, 17, tzinfo=UTC))
    scan_until_idle()
    runs = list(Run.objects.filter(schedule_id=schedule["scheduleId"], trigger=Trigger.SCHEDULE)
                .order_by("scheduled_at").values_list("scheduled_at", flat=True)[:3])
    # Last business days: Wed 2026-09-30, Thu 10-29 (Fri 30 excluded), Mon 11-30.
    assert runs == [datetime(2026, 9, 30, 17, tzinfo=UTC), datetime(2026, 10, 29, 17, tzinfo=UTC),
                    datetime(2026, 11, 30, 17, tzinfo=UTC)]


def test_console__schedule_under_calendars_reads_in_words(client):
    from django.contrib.auth import get_user_model
    from django.test import Client

    calendar_id = make_calendar(client, name="US bank holidays", excludeDates=["2027-07-05"])["calendarId"]
    schedule = create_schedule(client, recurrence={"kind": "business_day", "days": [-1], "at": "17:00",
                                                   "timezone": "America/New_York", "calendarIds": [calendar_id]},
                               calendar={"calendarIds": [calendar_id], "policy": "shift_before"})
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw"))
    words = ("at 17:00 on the last business day of each month (America/New_York), except US bank holidays; "
             "moved to the business day before on US bank holidays")
    for page in (f"/console/schedules/{schedule['scheduleId']}/", "/console/schedules/"):
        response = staff.get(page)
        assert response.status_code == 200
        assert words in response.content.decode().replace("&#x27;", "'"), page


def test_console__next_instants_show_moved_and_excluded_ones(client):
    """The console's schedule page shows the next instants as preview does with
    includeExcluded: a moved one with where from, an excluded one with its calendar's name."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    today = authority_now().date()
    wednesday = today + timedelta(days=(2 - today.weekday()) % 7 or 7)  # the next Wednesday after today
    calendar_id = make_calendar(client, name="Founders day", excludeDates=[wednesday.isoformat()])["calendarId"]
    weekly = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * 3", "timezone": "UTC"},
                             calendar={"calendarIds": [calendar_id], "policy": "shift_after"})
    daily = create_schedule(client, name="daily", recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
                            calendar={"calendarIds": [calendar_id], "policy": "skip"})
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw"))

    page = staff.get(f"/console/schedules/{weekly['scheduleId']}/").content.decode()
    shown = re.search(r'<p id="next-instants">(.*?)</p>', page, re.S)[1]
    assert f"{wednesday:%Y-%m-%d} 09:00" in shown and "excluded by Founders day" in shown
    assert f'{wednesday + timedelta(days=1):%Y-%m-%d} 09:00' in shown and "moved from" in shown

    page = staff.get(f"/console/schedules/{daily['scheduleId']}/").content.decode()
    shown = re.search(r'<p id="next-instants">(.*?)</p>', page, re.S)[1]
    if wednesday - today <= timedelta(days=4):  # within its next five instants
        assert "excluded by Founders day" in shown and "moved from" not in shown
    assert shown.count('class="next"') + shown.count('class="excluded"') == 5  # as preview with includeExcluded


def test_calendar__ics_of_several_megabytes__400_in_bounded_time(client):
    calendar_id = make_calendar(client)["calendarId"]
    event = b"BEGIN:VEVENT\r\nUID:x\r\nDTSTART;VALUE=DATE:20270101\r\nRRULE:FREQ=DAILY\r\nEND:VEVENT\r\n"
    body = b"BEGIN:VCALENDAR\r\n" + event * (10 * 1024 * 1024 // len(event)) + b"END:VCALENDAR\r\n"
    response = post_raw(client, f"/api/v1/calendars/{calendar_id}/import", body, content_type="text/calendar")
    assert response.status_code == 400
    small = b"BEGIN:VCALENDAR\r\n" + event + b"END:VCALENDAR\r\n"  # daily for 10 years: 3,660 dates, fits
    response = post_raw(client, f"/api/v1/calendars/{calendar_id}/import", small, content_type="text/calendar")
    assert response.status_code == 200 and len(response.json()["excludeDates"]) > 3600


@pytest.mark.parametrize("events", [
    # Many copies of one daily event: the same dates again and again.
    b"BEGIN:VEVENT\r\nUID:x\r\nDTSTART;VALUE=DATE:20270101\r\nRRULE:FREQ=DAILY\r\nEND:VEVENT\r\n" * 100,
    # An all-day event repeating every second for ten years.
    b"BEGIN:VEVENT\r\nUID:s\r\nDTSTART;VALUE=DATE:20270101\r\nRRULE:FREQ=SECONDLY\r\nEND:VEVENT\r\n",
])
def test_calendar__ics_expanding_without_end__400_in_bounded_time(client, events):
    import time as clock

    calendar_id = make_calendar(client)["calendarId"]
    started = clock.monotonic()
    response = post_raw(client, f"/api/v1/calendars/{calendar_id}/import",
                        b"BEGIN:VCALENDAR\r\n" + events + b"END:VCALENDAR\r\n", content_type="text/calendar")
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "body"
    assert clock.monotonic() - started < 5


def test_schedule_patch__another_tenants_calendar_is_404_before_a_stale_revision(client, other_client):
    theirs = make_calendar(other_client)["calendarId"]
    schedule = create_schedule(client)
    response = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}",
                            {"expectedRevision": 9, "calendar": {"calendarIds": [theirs]}})
    assert response.status_code == 404, response.content
    response = client.patch(f"/api/v1/schedules/{schedule['scheduleId']}",
                            {"expectedRevision": 1, "recurrence": {"kind": "after_completion", "delaySeconds": 5},
                             "calendar": {"calendarIds": [make_calendar(client)["calendarId"]]}})
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "calendar"


def test_backfill__honours_the_calendar_and_the_scanner_then_writes_no_duplicate(client):
    calendar_id = make_calendar(client, excludeDates=["2026-11-09"])["calendarId"]
    schedule_id = _monday_schedule(client, calendar_id, "skip")
    Schedule.objects.filter(id=schedule_id).update(next_run_at=datetime(2026, 11, 16, 9, tzinfo=UTC))
    response = client.post(f"/api/v1/schedules/{schedule_id}/backfill",
                           {"from": "2026-11-01T00:00:00Z", "to": "2026-11-20T00:00:00Z"})
    assert response.status_code == 200, response.content
    assert response.json()["instants"] == 1  # 11-02 only: 11-09 is excluded, 11-16 the scanner's
    # A record of 11-09 written meanwhile by anyone (an older backfill) is kept as it is.
    Run.objects.create(schedule_id=schedule_id, tenant_id=Schedule.objects.get(id=schedule_id).tenant_id,
                       trigger=Trigger.SCHEDULE, backfilled=True, revision=1, payload={}, job_type="demo.sleep",
                       resource_class="short", max_attempts=1, state="pending", pending_reason="backfill",
                       scheduled_at=datetime(2026, 11, 9, 9, tzinfo=UTC), due_at=datetime(2026, 11, 9, 9, tzinfo=UTC),
                       created_at=authority_now())
    scan_until_idle()
    at_holiday = Run.objects.get(schedule_id=schedule_id, scheduled_at=datetime(2026, 11, 9, 9, tzinfo=UTC))
    assert at_holiday.backfilled and at_holiday.skip_reason is None
    assert Run.objects.filter(schedule_id=schedule_id, scheduled_at=datetime(2026, 11, 16, 9, tzinfo=UTC)).exists()
