"""The operator admin: read-only state, with actions that go through the services."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.models import Run
from schedules.models import Schedule
from tests.api.conftest import create_schedule, run_once

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
        "effects/effectintent",
    ],
)
def test_changelists_render(admin_client, client, model):
    create_schedule(client)
    assert admin_client.get(f"/admin/{model}/").status_code == 200


def test_schedule_page_shows_next_five_instants_read_only(admin_client, client):
    schedule = create_schedule(client)
    response = admin_client.get(f"/admin/schedules/schedule/{schedule['scheduleId']}/change/")
    assert response.status_code == 200
    assert response.content.count(b"-05:00)") + response.content.count(b"-04:00)") == 5
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
