"""The console's coming occurrences on a schedule's page: skip, hold, note and remove a
directive, release a held run; staff only, POSTs with their CSRF token, the API's checks."""

import time
from datetime import timedelta

import pytest
from django.test import Client

from kernel.clock import authority_now, instant
from runs.authority import materialize_due
from runs.models import PendingReason, Run, RunState
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import AuditEntry, OccurrenceDirective
from tests.authority_steps import LEAD
from tests.console.seed import staff_user

pytestmark = pytest.mark.django_db


def _hourly(tenant, anchor):
    return schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "hourly", "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "interval", "everySeconds": 3600, "anchor": instant(anchor)}}))[0]


def _post(client, schedule, verb, at, note=""):
    return client.post(f"/console/schedules/{schedule.id}/occurrences/{verb}/", {"at": at, "note": note}, follow=True)


def test_schedule_page__skip_hold_note_remove_and_release_through_the_services(tenant, staff_client):
    first = authority_now().replace(microsecond=0) + LEAD  # held first, before anything else
    schedule = _hourly(tenant, first)
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    assert 'id="occurrences"' in page and f'data-at="{instant(first)}"' in page and 'class="hold"' in page
    assert "Held" in _post(staff_client, schedule, "hold", instant(first), "wait for finance").content.decode()

    second, third = instant(first + timedelta(hours=1)), instant(first + timedelta(hours=2))
    assert "Skipped" in _post(staff_client, schedule, "skip", second, "maintenance").content.decode()
    _post(staff_client, schedule, "note", third, "watch it")
    _post(staff_client, schedule, "clear", third)
    refused = _post(staff_client, schedule, "hold", instant(first + timedelta(minutes=1))).content.decode()
    assert "does not produce" in refused
    assert "note" in _post(staff_client, schedule, "note", second, "two\nlines").content.decode()
    assert list(OccurrenceDirective.objects.order_by("instant").values_list("instant", "action", "note", "actor")) == [
        (first, "hold", "wait for finance", "staff-only"),
        (first + timedelta(hours=1), "skip", "maintenance", "staff-only")]

    time.sleep(max(0.0, (first - authority_now()).total_seconds()) + 0.05)
    materialize_due()
    held = Run.objects.get(schedule=schedule)
    assert (held.state, held.pending_reason) == (RunState.PENDING, PendingReason.HELD)
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    assert 'id="held"' in page and "wait for finance" in page and 'class="release"' in page
    assert "maintenance" in page

    released = staff_client.post(f"/console/runs/{held.id}/release/", follow=True).content.decode()
    assert "Released" in released
    assert Run.objects.get(id=held.id).state == RunState.QUEUED
    assert {"hold", "skip", "note", "clear_directive", "release"} <= set(
        AuditEntry.objects.filter(schedule=schedule).values_list("action", flat=True))


def test_schedule_page__each_revision_shows_its_edits_diff(tenant, staff_client):
    from schedule_services.lifecycle import schedule_update
    from schedules.specs import ScheduleSpec
    from schedules import recurrence

    schedule = _hourly(tenant, authority_now() + timedelta(hours=1))
    rule = recurrence.parse_rule({"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"})
    schedule_update(tenant=tenant, schedule_id=schedule.id, expected_revision=1, changes=ScheduleSpec(recurrence=rule))
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    assert '<td class="diff">+30 −200</td>' in page


def test_directive_posts__need_staff_a_post_and_a_csrf_token(tenant, staff_client):
    schedule = _hourly(tenant, authority_now() + timedelta(hours=1))
    at = instant(schedule.next_run_at)
    url = f"/console/schedules/{schedule.id}/occurrences/skip/"
    assert staff_client.get(url).status_code == 405
    assert Client().post(url, {"at": at}).status_code == 302  # to the login
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(staff_user("staff-too"))
    assert guarded.post(url, {"at": at}).status_code == 403
    assert staff_client.post(f"/console/schedules/{schedule.id}/occurrences/explode/", {"at": at}).status_code == 400
    assert not OccurrenceDirective.objects.exists()
