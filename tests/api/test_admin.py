"""The operator admin: read-only state, with actions that go through the services."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.capacity.live import slots_report
from runs.models import Run
from schedules.models import AuthorKind, OccurrenceDirective, Schedule
from tests.api.conftest import create_schedule, run_once
from tests.authority_steps import LEAD
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def action(admin_client, model: str, name: str, ids: list[str]):
    return admin_client.post(
        f"/admin/{model}/", {"action": name, "_selected_action": ids, "index": 0}, follow=True
    )


@pytest.mark.parametrize(
    "model",
    [
        "schedules/tenant",
        "schedules/jobtype",
        "schedules/apitoken",
        "schedules/schedule",
        "runs/run",
        "runs/outbox",
        "runs/storedobject",
        "runs/effectintent",
    ],
)
def test_changelists_render(admin_client, client, model):
    create_schedule(client)
    assert admin_client.get(f"/admin/{model}/").status_code == 200


def test_schedule_page_shows_next_five_instants_in_its_zone(admin_client, client):
    schedule = create_schedule(client)
    response = admin_client.get(f"/admin/schedules/schedule/{schedule['scheduleId']}/change/")
    assert response.status_code == 200
    instants = re.findall(rb"<div>(\w{3} \S+ 09:00:00 E[SD]T \(America/New_York\) = \S+Z)</div>", response.content)
    assert len(instants) == 5 and all(not line.startswith((b"Sat", b"Sun")) for line in instants)
    assert b'name="revision"' not in response.content  # no editable state fields


def test_schedule_actions_call_services(admin_client, client):
    schedule = create_schedule(client)
    action(admin_client, "schedules/schedule", "pause", [schedule["scheduleId"]])
    assert Schedule.objects.get(pk=schedule["scheduleId"]).paused is True
    action(admin_client, "schedules/schedule", "resume", [schedule["scheduleId"]])
    assert Schedule.objects.get(pk=schedule["scheduleId"]).paused is False
    action(admin_client, "schedules/schedule", "run_now", [schedule["scheduleId"]])
    assert Run.objects.get(schedule_id=schedule["scheduleId"]).state == "queued"


def test_run_cancel_action_uses_authority(admin_client, client):
    schedule = create_schedule(client)
    run = run_once(client, schedule["scheduleId"])
    response = action(admin_client, "runs/run", "cancel", [run["runId"]])
    assert response.status_code == 200
    assert Run.objects.get(pk=run["runId"]).state == "canceled"
    # A second cancel is reported to the operator, not raised.
    response = action(admin_client, "runs/run", "cancel", [run["runId"]])
    assert response.status_code == 200
    assert Run.objects.get(pk=run["runId"]).state == "canceled"


def test_runs_cannot_be_added_or_deleted_in_admin(admin_client):
    assert admin_client.get("/admin/runs/run/add/").status_code == 403


# --- Create and edit through the API's validation and services -----------------------------

ADD_URL = "/admin/schedules/schedule/add/"


def add_form(tenant, **overrides) -> dict:
    """The admin's add form as a browser posts it (every field, blanks as empty strings)."""
    return {
        "tenant": tenant.id, "name": "nightly", "job_type": "demo.sleep", "params": '{"seconds": 0}',
        "recurrence_kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York",
        "every_seconds": "", "anchor": "", "delay_seconds": "",
        "misfire_policy": "latest_only", "misfire_grace_seconds": "60", "overlap_policy": "buffer_one",
        "retry_max_attempts": "", "retry_initial_delay_seconds": "", "retry_max_delay_seconds": "",
        "effects": "{}", "expected_revision": "", "previewed": "", **overrides,
    }


def change_form(response) -> dict:
    """What a browser posts back from a rendered change form: every field's current value."""
    form = response.context["adminform"].form
    values = {name: form[name].value() for name in form.fields}
    return {name: "" if value is None else str(value) for name, value in values.items()}


def form_errors(response) -> dict:
    assert response.status_code == 200, response.status_code
    return {field: list(errors) for field, errors in response.context["adminform"].form.errors.items()}


def preview_shown(response) -> list[str]:
    assert response.status_code == 200
    return response.context["adminform"].form.preview or []


def test_admin_add__stores_health_expectations(admin_client, tenant):
    first = admin_client.post(ADD_URL, add_form(tenant, expectations='{"startWithinSeconds": 120}'))
    assert preview_shown(first)
    second = admin_client.post(ADD_URL, change_form(first))
    assert second.status_code == 302, form_errors(second)
    schedule = Schedule.objects.get()
    assert schedule.expectations == {"startWithinSeconds": 120} and schedule.expect_start_within_seconds == 120


def test_admin_add__shows_five_instants_first_then_creates_through_the_service(admin_client, tenant):
    first = admin_client.post(ADD_URL, add_form(tenant))
    lines = preview_shown(first)
    assert Schedule.objects.count() == 0  # nothing saved before the preview was seen
    assert len(lines) == 5 and all("02:30:00 E" in line and "(America/New_York)" in line for line in lines)
    assert b"Next five instants of this rule" in first.content and b"errornote" not in first.content

    second = admin_client.post(ADD_URL, change_form(first))
    assert second.status_code == 302, form_errors(second)
    schedule = Schedule.objects.get()
    assert (schedule.tenant, schedule.name, schedule.job_type_id) == (tenant, "nightly", "demo.sleep")
    assert schedule.recurrence == {"kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York",
                                   "dialect": "vixie"}
    assert schedule.revisions.get().author_kind == AuthorKind.ADMIN
    assert schedule.next_run_at is not None and schedule.retry_max_attempts == 3  # the job type's default


def test_admin_add__spring_forward_preview_matches_the_api(admin_client, client, tenant):
    """The DST gap: 02:30 on 2027-03-14 does not exist in New York and fires at 03:30 EDT."""
    response = admin_client.post(ADD_URL, {**add_form(tenant), "_preview": "1"})
    api = client.post("/api/v1/schedules/preview", {
        "recurrence": {"kind": "cron", "cron": "30 2 * * *", "timezone": "America/New_York"}, "count": 5,
    }).json()
    assert [line.rsplit(" = ", 1)[1] for line in preview_shown(response)] == [i["at"] for i in api["instants"]]


def test_admin_add__preview_button_never_saves(admin_client, tenant):
    first = admin_client.post(ADD_URL, add_form(tenant))
    again = admin_client.post(ADD_URL, {**change_form(first), "_preview": "1"})
    assert len(preview_shown(again)) == 5 and Schedule.objects.count() == 0


def test_admin_add__a_changed_rule_is_previewed_again(admin_client, tenant):
    first = admin_client.post(ADD_URL, add_form(tenant))
    changed = admin_client.post(ADD_URL, {**change_form(first), "cron": "0 9 * * *"})
    assert all("09:00:00" in line for line in preview_shown(changed)) and Schedule.objects.count() == 0


@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"cron": "61 * * * *"}, "cron", "cron"),
        ({"cron": ""}, "cron", "recurrence.cron is required"),
        ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
        ({"recurrence_kind": "interval", "every_seconds": "0"}, "every_seconds", "everySeconds"),
        ({"recurrence_kind": "interval", "every_seconds": "60", "anchor": "yesterday"}, "anchor", "anchor"),
        ({"name": "   "}, "name", "required"),
        ({"params": "[1, 2]"}, "params", "params"),
        ({"misfire_grace_seconds": "-1"}, "misfire_grace_seconds", "misfireGraceSeconds"),
        ({"retry_max_attempts": "0"}, "retry_max_attempts", "maxAttempts"),
        ({"effects": '{"email": {"to": ["not-an-address"]}}'}, "effects", "email"),
        ({"effects": '{"webhook": {"url": "http://127.0.0.1/hook"}}'}, "effects", "public host"),
        ({"expectations": '{"startWithinSeconds": 0}'}, "expectations", "startWithinSeconds"),
        ({"expectations": '{"startWithinSeconds": 60, "alert": {"webhook": {"url": "http://10.0.0.1/"}}}'},
         "expectations", "public host"),
    ],
)
def test_admin_add__bad_input_is_a_form_error_on_its_field(admin_client, tenant, overrides, field, message):
    response = admin_client.post(ADD_URL, add_form(tenant, **overrides))
    errors = form_errors(response)
    assert list(errors) == [field] and message in errors[field][0], errors
    assert b"errornote" in response.content and Schedule.objects.count() == 0


@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"params": '{"seconds": "soon"}'}, "params", "params"),  # the job type's schema: the service's check
        ({"retry_initial_delay_seconds": "60", "retry_max_delay_seconds": "5"}, "retry_max_delay_seconds",
         "maxDelaySeconds"),
    ],
)
def test_admin_add__service_refusals_are_form_errors(admin_client, tenant, overrides, field, message):
    first = admin_client.post(ADD_URL, add_form(tenant, **overrides))
    assert preview_shown(first)
    errors = form_errors(admin_client.post(ADD_URL, change_form(first)))
    assert list(errors) == [field] and message in errors[field][0], errors
    assert Schedule.objects.count() == 0


def test_admin_add__quota_and_job_type_grant_are_form_errors(admin_client):
    small = make_tenant("small", job_types=["report.sales"], max_schedules=0)
    first = admin_client.post(ADD_URL, add_form(small))
    errors = form_errors(admin_client.post(ADD_URL, change_form(first)))
    assert "job_type" in errors and "may not use" in errors["job_type"][0]
    first = admin_client.post(ADD_URL, add_form(small, job_type="report.sales", params='{"region": "eu"}'))
    errors = form_errors(admin_client.post(ADD_URL, change_form(first)))
    assert "tenant" in errors and "quota" in errors["tenant"][0]


def change_url(schedule_id: str) -> str:
    return f"/admin/schedules/schedule/{schedule_id}/change/"


def test_admin_edit__revises_through_the_service_as_admin(admin_client, client):
    schedule_id = create_schedule(client)["scheduleId"]
    page = admin_client.get(change_url(schedule_id))
    renamed = admin_client.post(change_url(schedule_id), {**change_form(page), "name": "renamed"})
    assert renamed.status_code == 302, form_errors(renamed)  # the rule is unchanged: no preview needed
    schedule = Schedule.objects.get(pk=schedule_id)
    assert (schedule.name, schedule.revision) == ("renamed", 2)
    assert schedule.revisions.get(revision=2).author_kind == AuthorKind.ADMIN

    page = admin_client.get(change_url(schedule_id))
    previewed = admin_client.post(change_url(schedule_id), {**change_form(page), "cron": "15 7 * * *"})
    assert all("07:15:00" in line for line in preview_shown(previewed))
    assert Schedule.objects.get(pk=schedule_id).revision == 2
    saved = admin_client.post(change_url(schedule_id), change_form(previewed))
    assert saved.status_code == 302, form_errors(saved)
    schedule = Schedule.objects.get(pk=schedule_id)
    assert schedule.revision == 3 and schedule.recurrence["cron"] == "15 7 * * *"
    assert schedule.name == "renamed" and schedule.params == {"seconds": 0}
    revisions = client.get(f"/api/v1/schedules/{schedule_id}/revisions").json()
    assert [r["authorKind"] for r in revisions["results"]][:2] == ["admin", "admin"]


def test_admin_edit__unchanged_form_writes_no_revision(admin_client, client):
    schedule_id = create_schedule(client)["scheduleId"]
    page = admin_client.get(change_url(schedule_id))
    assert admin_client.post(change_url(schedule_id), change_form(page)).status_code == 302
    assert Schedule.objects.get(pk=schedule_id).revision == 1


def test_admin_edit__a_concurrent_api_edit_is_a_form_error(admin_client, client):
    schedule_id = create_schedule(client)["scheduleId"]
    page = admin_client.get(change_url(schedule_id))
    assert client.patch(f"/api/v1/schedules/{schedule_id}", {"expectedRevision": 1, "name": "api"}).status_code == 200
    response = admin_client.post(change_url(schedule_id), {**change_form(page), "name": "admin"})
    errors = form_errors(response)
    assert "revision 2" in errors["__all__"][0]
    assert Schedule.objects.get(pk=schedule_id).name == "api"


def test_admin_edit__bad_cron_is_a_form_error(admin_client, client):
    schedule_id = create_schedule(client)["scheduleId"]
    page = admin_client.get(change_url(schedule_id))
    errors = form_errors(admin_client.post(change_url(schedule_id), {**change_form(page), "cron": "0 9 * *"}))
    assert list(errors) == ["cron"]
    assert Schedule.objects.get(pk=schedule_id).revision == 1


def test_admin_schedules__deleted_hidden_by_default_and_view_only(admin_client, client):
    live = create_schedule(client, name="live-one")["scheduleId"]
    gone = create_schedule(client, name="gone-one")["scheduleId"]
    assert client.delete(f"/api/v1/schedules/{gone}").status_code == 204
    listing = admin_client.get("/admin/schedules/schedule/")
    assert live.encode() in listing.content and gone.encode() not in listing.content
    deleted = admin_client.get("/admin/schedules/schedule/?deleted=yes")
    assert gone.encode() in deleted.content and live.encode() not in deleted.content
    every = admin_client.get("/admin/schedules/schedule/?deleted=all")
    assert gone.encode() in every.content and live.encode() in every.content

    page = admin_client.get(change_url(gone))
    assert page.status_code == 200 and b'name="name"' not in page.content  # history: viewable, not editable
    assert admin_client.post(change_url(gone), {"name": "x"}).status_code == 403


def test_admin_schedule_page__lists_recent_runs_with_links(admin_client, client):
    schedule_id = create_schedule(client)["scheduleId"]
    runs = [run_once(client, schedule_id)["runId"] for _ in range(2)]
    run_once_canceled = runs[0]
    assert client.post(f"/api/v1/runs/{run_once_canceled}/cancel").status_code in (200, 202)
    page = admin_client.get(change_url(schedule_id)).content.decode()
    for run_id in runs:
        assert f'<a href="/admin/runs/run/{run_id}/change/">{run_id}</a>' in page
    assert "<td>canceled</td>" in page and "<td>queued</td>" in page
    assert "(America/New_York)</td>" in page  # scheduled times on the schedule's wall clock
    assert f"/admin/runs/run/?q={schedule_id}" in page


def test_admin_schedule_list__next_run_in_the_schedules_zone(admin_client, client):
    create_schedule(client)
    listing = admin_client.get("/admin/schedules/schedule/").content.decode()
    assert re.search(r"\w{3} \S+ 09:00:00 E[SD]T \(America/New_York\)", listing)


# --- Labels and what embedded mode hides -------------------------------------------------------


def test_admin_index__beat_models_hidden_in_embedded_mode(admin_client, settings):
    settings.REDIS_URL = ""
    index = admin_client.get("/admin/").content
    assert b"Periodic tasks" not in index and b"Intervals" not in index
    assert admin_client.get("/admin/django_celery_beat/periodictask/").status_code == 403


def test_admin_index__beat_models_shown_in_redis_mode(admin_client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/9"
    index = admin_client.get("/admin/").content
    assert b"Periodic tasks" in index
    assert admin_client.get("/admin/django_celery_beat/periodictask/").status_code == 200


def test_admin_index__outbox_label(admin_client):
    index = admin_client.get("/admin/").content
    assert b"Outbox entries" in index and b"Outboxs" not in index


def test_admin_add__after_completion_preview_says_what_the_delay_means(admin_client, tenant):
    response = admin_client.post(ADD_URL, add_form(tenant, recurrence_kind="after_completion", delay_seconds="90"))
    lines = preview_shown(response)
    assert len(lines) == 1 and lines[0].startswith("90s after the previous run ends") and "(America/New_York)" in lines[0]


def test_admin_run_list__scheduled_time_in_the_schedules_zone(admin_client, client):
    run_once(client, create_schedule(client)["scheduleId"])
    assert b"(America/New_York)</td>" in admin_client.get("/admin/runs/run/").content


def test_admin_add_and_edit__strict_promise_passes_the_apis_admission(admin_client, client, tenant):
    slots_report("worker:test:1", {"short": 10})
    for i in range(40):  # 40 strict five-second runs at 09:00 on 10 slots: a strict newcomer starts at 20 s
        create_schedule(client, name=f"wave-{i}", recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
                        startDeadlineSeconds=86400)
    strict = {"cron": "0 9 * * *", "timezone": "UTC", "name": "strict"}

    first = admin_client.post(ADD_URL, add_form(tenant, **strict, start_deadline_seconds="10"))
    errors = form_errors(admin_client.post(ADD_URL, change_form(first)))
    assert list(errors) == ["start_deadline_seconds"] and "cannot start this schedule within 10 s" in errors[
        "start_deadline_seconds"][0]
    assert not Schedule.objects.filter(name="strict").exists()

    first = admin_client.post(ADD_URL, add_form(tenant, **strict, start_deadline_seconds="30"))
    saved = admin_client.post(ADD_URL, change_form(first))
    assert saved.status_code == 302, form_errors(saved)
    schedule = Schedule.objects.get(name="strict")
    assert (schedule.start_deadline_seconds, schedule.revision) == (30, 1)

    page = admin_client.get(change_url(schedule.id))
    errors = form_errors(admin_client.post(change_url(schedule.id), {**change_form(page), "start_deadline_seconds": "5"}))
    assert list(errors) == ["start_deadline_seconds"]
    assert Schedule.objects.get(pk=schedule.id).revision == 1
    cleared = admin_client.post(change_url(schedule.id), {**change_form(page), "start_deadline_seconds": ""})
    assert cleared.status_code == 302, form_errors(cleared)
    assert Schedule.objects.get(pk=schedule.id).start_deadline_seconds is None


def test_calendar_admin__create_edit_import_through_the_services(admin_client, client, tenant):
    from schedules.models import Calendar, CalendarRevision

    response = admin_client.post("/admin/schedules/calendar/add/", {
        "tenant": tenant.id, "name": "bank holidays", "timezone": "Europe/London",
        "exclude_dates": "2027-12-27\n2027-12-28", "exclude_annual": "12-25, 12-26", "exclude_weekdays": "6, 7"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    calendar = Calendar.objects.get(name="bank holidays")
    assert (calendar.exclude_dates, calendar.exclude_weekdays, calendar.revision) == (
        ["2027-12-27", "2027-12-28"], [6, 7], 1)
    bad = admin_client.post(f"/admin/schedules/calendar/{calendar.id}/change/", {
        "name": "bank holidays", "timezone": "Europe/London", "exclude_dates": "2027-02-30",
        "expected_revision": 1})
    assert bad.status_code == 200 and b"not a date" in bad.content
    from django.core.files.uploadedfile import SimpleUploadedFile

    ics = SimpleUploadedFile("h.ics", b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:1\r\n"
                             b"DTSTART;VALUE=DATE:20270405\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "text/calendar")
    edited = admin_client.post(f"/admin/schedules/calendar/{calendar.id}/change/", {
        "name": "bank holidays", "timezone": "Europe/London", "exclude_dates": "2027-12-27",
        "expected_revision": 1, "import_ics": ics})
    assert edited.status_code == 302, edited.content
    calendar.refresh_from_db()
    assert calendar.exclude_dates == ["2027-04-05", "2027-12-27"] and calendar.revision == 3
    assert CalendarRevision.objects.filter(calendar=calendar).count() == 3
    assert admin_client.get("/admin/schedules/calendar/").status_code == 200
    stale = admin_client.post(f"/admin/schedules/calendar/{calendar.id}/change/", {
        "name": "x", "timezone": "UTC", "expected_revision": 1})
    assert stale.status_code == 200 and b"edited meanwhile" in stale.content


def test_admin_add__business_day_under_a_calendar_previews_then_creates(admin_client, tenant, client):
    from schedules.models import Calendar

    calendar = Calendar.objects.create(tenant=tenant, name="holidays", exclude_dates=["2030-01-31"])
    form = add_form(tenant, recurrence_kind="business_day", days="[-1]", at_time="17:00", timezone="UTC",
                    calendar_ids=f'["{calendar.id}"]', cron="")
    first = admin_client.post(ADD_URL, form)
    lines = preview_shown(first)
    assert len(lines) == 5 and all("17:00:00" in line for line in lines)
    second = admin_client.post(ADD_URL, change_form(first))
    assert second.status_code == 302, form_errors(second)
    schedule = Schedule.objects.get(name="nightly")
    assert schedule.recurrence["kind"] == "business_day" and schedule.recurrence["calendarIds"] == [calendar.id]
    page = admin_client.get(f"/admin/schedules/schedule/{schedule.id}/change/")
    assert page.status_code == 200
    shifted = admin_client.post(f"/admin/schedules/schedule/{schedule.id}/change/", {
        **change_form(page), "recurrence_kind": "cron", "cron": "0 9 * * *",
        "calendar": f'{{"calendarIds": ["{calendar.id}"], "policy": "shift_after"}}'})
    assert len(preview_shown(shifted)) == 5  # the calendar change is shown before it is saved
    saved = admin_client.post(f"/admin/schedules/schedule/{schedule.id}/change/", change_form(shifted))
    assert saved.status_code == 302, form_errors(saved)
    schedule.refresh_from_db()
    assert schedule.calendar == {"calendarIds": [calendar.id], "policy": "shift_after"}


def test_admin_edit__a_changed_rule_shows_the_edits_diff_and_orphaned_directives_before_saving(admin_client, client):
    schedule_id = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"})["scheduleId"]
    at = client.get(f"/api/v1/schedules/{schedule_id}/occurrences?limit=1").json()["results"][0]["at"]
    assert client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{at}", {"action": "skip", "note": "holiday"},
                      format="json").status_code == 200
    page = admin_client.get(change_url(schedule_id))

    previewed = admin_client.post(change_url(schedule_id), {**change_form(page), "cron": "30 9 * * *"})

    diff = previewed.context["adminform"].form.diff
    assert diff[0].startswith("added (30): ") and "09:30:00" in diff[0] and diff[0].endswith(" ...")
    assert diff[1].startswith("removed (30): ") and "09:00:00" in diff[1]
    assert diff[2].startswith("directive orphaned: skip at ") and diff[2].endswith("(holiday)")
    assert b"What this edit changes over the next 30 days" in previewed.content
    schedule = Schedule.objects.get(pk=schedule_id)
    assert schedule.revision == 1 and schedule.recurrence["cron"] == "0 9 * * *"
    assert not schedule.directives.filter(orphaned_at__isnull=False).exists()


def test_admin_change_page__lists_coming_occurrences_with_their_directives(admin_client, client):
    schedule_id = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"})["scheduleId"]
    at = client.get(f"/api/v1/schedules/{schedule_id}/occurrences?limit=1").json()["results"][0]["at"]
    client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{at}", {"action": "hold", "note": "audit first"},
               format="json")
    page = admin_client.get(change_url(schedule_id)).content.decode()
    assert "Coming occurrences and their directives" in page
    assert "hold: audit first (by acme)" in page and f"/console/schedules/{schedule_id}/" in page


def test_admin_directives__listed_read_only_with_schedule_instant_kind_note_and_filters(admin_client, client):
    schedule_id = create_schedule(client, name="ledger", recurrence={"kind": "cron", "cron": "0 9 * * *",
                                                                      "timezone": "America/New_York"})["scheduleId"]
    first, second = (o["at"] for o in client.get(f"/api/v1/schedules/{schedule_id}/occurrences?limit=2").json()["results"])
    for at, body in ((first, {"action": "skip", "note": "bank holiday"}), (second, {"action": "hold", "note": "audit"})):
        assert client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{at}", body, format="json").status_code == 200
    listing = "/admin/schedules/occurrencedirective/"

    page = admin_client.get(listing)

    assert page.status_code == 200
    text = page.content.decode()
    assert "ledger" in text and "bank holiday" in text and "audit" in text and "(America/New_York)" in text
    assert [d.note for d in page.context["cl"].result_list] == ["bank holiday", "audit"]  # by instant
    skipped = admin_client.get(listing, {"action__exact": "skip"}).context["cl"].result_list
    assert [d.action for d in skipped] == ["skip"]
    # A PATCH whose rule no longer produces them orphans both: the filter finds them.
    assert client.patch(f"/api/v1/schedules/{schedule_id}", {"expectedRevision": 1, "recurrence": {
        "kind": "cron", "cron": "30 9 * * *", "timezone": "America/New_York"}}).status_code == 200
    assert len(admin_client.get(listing, {"orphaned": "yes"}).context["cl"].result_list) == 2
    assert len(admin_client.get(listing, {"orphaned": "no"}).context["cl"].result_list) == 0
    assert len(admin_client.get(listing, {"q": schedule_id}).context["cl"].result_list) == 2
    # Read-only: no add, change or delete; edits go through the API or the console.
    directive = OccurrenceDirective.objects.get(note="audit")
    assert admin_client.get(listing + "add/").status_code == 403
    view = admin_client.get(f"{listing}{directive.pk}/change/")
    assert view.status_code == 200 and b"Save" not in view.content
    assert admin_client.post(f"{listing}{directive.pk}/change/", {"note": "changed"}).status_code == 403
    assert admin_client.post(f"{listing}{directive.pk}/delete/", {"post": "yes"}).status_code == 403
    directive.refresh_from_db()
    assert directive.note == "audit"
    assert f"{listing}?q={schedule_id}" in admin_client.get(change_url(schedule_id)).content.decode()


def test_admin_directives__staff_only(client):
    assert Client().get("/admin/schedules/occurrencedirective/").status_code == 302  # to the login page


def test_admin_directives__remove_action_goes_through_the_service_and_is_audited(admin_client, client):
    from schedules.models import AuditEntry

    schedule_id = create_schedule(client, recurrence={"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"})["scheduleId"]
    at = client.get(f"/api/v1/schedules/{schedule_id}/occurrences?limit=1").json()["results"][0]["at"]
    client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{at}", {"action": "skip"}, format="json")
    directive = OccurrenceDirective.objects.get()

    page = action(admin_client, "schedules/occurrencedirective", "remove", [directive.pk])

    assert "Removed 1 item(s)." in page.content.decode()
    assert not OccurrenceDirective.objects.exists()
    entry = AuditEntry.objects.filter(schedule_id=schedule_id).latest("id")
    assert (entry.action, entry.actor_kind, entry.actor) == ("clear_directive", "admin", "root")


def test_admin_runs__release_action_releases_a_held_run_through_the_authority(admin_client, client):
    import time

    from runs import authority
    from schedules.models import AuditEntry
    from kernel.clock import authority_now, instant

    first = authority_now().replace(microsecond=0) + LEAD
    schedule_id = create_schedule(client, recurrence={"kind": "interval", "everySeconds": 3600,
                                                      "anchor": instant(first)})["scheduleId"]
    assert client.put(f"/api/v1/schedules/{schedule_id}/occurrences/{instant(first)}", {"action": "hold"},
                      format="json").status_code == 200
    other = run_once(client, schedule_id)["runId"]  # not held: refused, named in the message
    time.sleep(max(0.0, (first - authority_now()).total_seconds()) + 0.05)
    authority.materialize_due()
    held = Run.objects.get(schedule_id=schedule_id, trigger="schedule")
    assert (held.state, held.pending_reason) == ("pending", "held")
    listed = admin_client.get("/admin/runs/run/", {"pending_reason__exact": "held"}).context["cl"].result_list
    assert [run.id for run in listed] == [held.id]

    page = action(admin_client, "runs/run", "release", [held.id, other]).content.decode()

    assert "Released 1 item(s)." in page and "only a held run can be released" in page
    assert Run.objects.get(id=held.id).state == "queued"
    entry = AuditEntry.objects.filter(schedule_id=schedule_id, action="release").get()
    assert (entry.actor_kind, entry.actor) == ("admin", "root")
