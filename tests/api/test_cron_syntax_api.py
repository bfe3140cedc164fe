"""Cron dialects and syntax through the API: dialect stored and shown, warnings on preview,
create, PATCH and GET, H fixed by the schedule id (and hashKey in preview), hostile values
as 400 invalid_cron naming the field."""

import time

import pytest

from runs.authority.catch_up_bounds import WavePlans
from schedules.models import Schedule, ScheduleRevision
from schedules.recurrence import next_after, parse_rule
from schedules.selectors import schedule_rule
from tests.api.conftest import CRON_BODY, assert_error, create_schedule

pytestmark = pytest.mark.django_db

SCHEDULES = "/api/v1/schedules"
PREVIEW = "/api/v1/schedules/preview"


def cron(text, **extra):
    return {"kind": "cron", "cron": text, "timezone": "UTC", **extra}


def test_dialect_is_stored_shown_and_defaults_to_vixie(client):
    created = create_schedule(client)
    assert created["recurrence"]["dialect"] == "vixie" and created["warnings"] == []
    anded = create_schedule(client, name="and", recurrence=cron("0 9 1-7 * mon", dialect="and"))
    assert anded["recurrence"] == cron("0 9 1-7 * mon", dialect="and")
    assert Schedule.objects.get(id=anded["scheduleId"]).recurrence["dialect"] == "and"
    revision = ScheduleRevision.objects.get(schedule_id=anded["scheduleId"])
    assert revision.payload["recurrence"]["dialect"] == "and"
    assert_error(client.post(SCHEDULES, {**CRON_BODY, "recurrence": cron("0 9 * * *", dialect="quartz")}), 400,
                 "invalid_request", "recurrence.dialect")


def test_both_day_fields_restricted__warning_on_preview_create_patch_and_get(client):
    body = {"recurrence": cron("0 12 13 * fri"), "after": "2026-01-01T00:00:00Z"}
    preview = client.post(PREVIEW, body, format="json").json()
    [warning] = preview["warnings"]
    assert warning["code"] == "ambiguous_day_fields" and warning["message"]
    assert set(warning["alternatives"]) == {"vixie", "and", "or"}
    assert warning["alternatives"]["and"][:2] == ["2026-02-13T12:00:00Z", "2026-03-13T12:00:00Z"]
    assert [i["at"] for i in preview["instants"]] == warning["alternatives"]["vixie"]

    created = create_schedule(client, recurrence=cron("0 12 13 * fri"))
    assert [w["code"] for w in created["warnings"]] == ["ambiguous_day_fields"]
    assert all(len(v) == 5 for v in created["warnings"][0]["alternatives"].values())
    path = f"{SCHEDULES}/{created['scheduleId']}"
    assert client.get(path).json()["warnings"][0]["code"] == "ambiguous_day_fields"
    edited = client.patch(path, {"expectedRevision": 1, "recurrence": cron("0 12 * * fri")}, format="json").json()
    assert edited["warnings"] == []
    assert client.post(PREVIEW, {"recurrence": cron("0 12 * * fri")}, format="json").json()["warnings"] == []


def test_h_is_fixed_by_the_schedule_id_everywhere_and_survives_edits(client):
    created = create_schedule(client, recurrence=cron("H H(8-17) * * *"))
    schedule_id = created["scheduleId"]
    assert created["recurrence"]["hashKey"] == schedule_id
    rule = parse_rule(cron("H H(8-17) * * *"), anchor_required=False).keyed(schedule_id)
    stored = Schedule.objects.get(id=schedule_id)
    # The scanner's planner, the API's instants and preview with hashKey all read the same rule.
    assert WavePlans(now=stored.created_at).rule(stored) == rule == schedule_rule(stored)
    instants = client.get(f"{SCHEDULES}/{schedule_id}/preview").json()["instants"]
    preview = client.post(PREVIEW, {"recurrence": cron("H H(8-17) * * *"), "hashKey": schedule_id},
                          format="json").json()["instants"]
    assert [i["at"] for i in instants] == [i["at"] for i in preview]
    assert created["nextRunAt"] == instants[0]["at"]
    assert next_after(rule, stored.created_at).hour in range(8, 18)

    # A client echoing another key is overridden; an edit keeps the values.
    path = f"{SCHEDULES}/{schedule_id}"
    edited = client.patch(path, {"expectedRevision": 1, "name": "renamed",
                                 "recurrence": cron("H H(8-17) * * *", hashKey="someone-else")}, format="json").json()
    assert edited["recurrence"]["hashKey"] == schedule_id and edited["nextRunAt"] == created["nextRunAt"]
    copy = create_schedule(client, name="copy", recurrence=edited["recurrence"])
    assert copy["recurrence"]["hashKey"] == copy["scheduleId"]


@pytest.mark.parametrize(("text", "field"), [
    ("0 0 L-40 * *", "day-of-month"), ("0 0 * * 5#6", "day-of-week"), ("0 0 32W * *", "day-of-month"),
    ("H(5-2) * * * *", "minute"), ("0 0 31 2 *", "day-of-month"), ("61 * * * * *", "second"),
])
def test_hostile_cron_is_invalid_cron_naming_the_field(client, text, field):
    began = time.perf_counter()
    for response in (client.post(SCHEDULES, {**CRON_BODY, "recurrence": cron(text)}, format="json"),
                     client.post(PREVIEW, {"recurrence": cron(text)}, format="json")):
        assert_error(response, 400, "invalid_cron", "recurrence.cron")
        assert field in response.json()["error"]["message"]
    assert time.perf_counter() - began < 2


@pytest.mark.parametrize("key", ["", "x" * 101, 5, None, "a\nb"])
def test_hostile_hash_key_is_a_400(client, key):
    response = client.post(PREVIEW, {"recurrence": cron("H * * * *"), "hashKey": key}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"]["field"].endswith("hashKey")


ADD_URL = "/admin/schedules/schedule/add/"


def admin_add_form(tenant, **overrides) -> dict:
    return {
        "tenant": tenant.id, "name": "first monday", "job_type": "demo.sleep", "params": '{"seconds": 0}',
        "recurrence_kind": "cron", "cron": "0 9 1-7 * mon", "dialect": "vixie", "timezone": "UTC",
        "every_seconds": "", "anchor": "", "delay_seconds": "",
        "misfire_policy": "latest_only", "misfire_grace_seconds": "60", "overlap_policy": "buffer_one",
        "retry_max_attempts": "", "retry_initial_delay_seconds": "", "retry_max_delay_seconds": "",
        "effects": "{}", "expected_revision": "", "previewed": "", **overrides,
    }


def test_admin_shows_the_warning_with_each_dialect_then_saves_the_chosen_dialect(admin_client, tenant):
    first = admin_client.post(ADD_URL, admin_add_form(tenant))
    lines = first.context["adminform"].form.preview
    assert len(lines) == 5 + 4 and lines[5].startswith("warning ambiguous_day_fields")
    assert [line.split(":")[0] for line in lines[6:]] == ["under vixie", "under and", "under or"]
    assert not Schedule.objects.exists()
    chosen = admin_client.post(ADD_URL, admin_add_form(tenant, dialect="and"))  # a changed rule: shown again
    assert chosen.status_code == 200 and not Schedule.objects.exists()
    form = chosen.context["adminform"].form
    saved = admin_client.post(ADD_URL, {name: "" if form[name].value() is None else str(form[name].value())
                                        for name in form.fields})
    assert saved.status_code == 302
    assert Schedule.objects.get().recurrence["dialect"] == "and"
