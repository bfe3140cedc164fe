"""The console's Health page: open incidents first, since when and which occurrence, then
the resolved ones, paged."""

import re
from datetime import timedelta

import pytest

from runs.health.evaluation import health_pass
from runs.models import Incident
from tests.authority_steps import make_due
from tests.factories import make_tenant
from tests.health.steps import expecting, materialize

pytestmark = pytest.mark.django_db


def test_health_page__open_incidents_first_with_their_occurrence(staff_client):
    tenant = make_tenant("acme")
    unclaimed = expecting(tenant, name="nightly-export", startWithinSeconds=60)
    run = materialize(unclaimed, ago=timedelta(minutes=5))
    never = expecting(tenant, name="hourly-sync", startWithinSeconds=60)
    make_due(never, ago=timedelta(minutes=5))
    old = expecting(tenant, name="weekly-report", startWithinSeconds=60)
    make_due(old, ago=timedelta(minutes=5))
    health_pass()
    closed = Incident.objects.get(schedule=old)
    Incident.objects.filter(id=closed.id).update(resolved_at=closed.opened_at + timedelta(minutes=1),
                                                 resolution="recovered")
    response = staff_client.get("/console/health/")
    assert response.status_code == 200
    page = response.content.decode()
    open_table = page[page.index('id="open-incidents"'):page.index('id="resolved-incidents"')]
    assert "nightly-export" in open_table and "hourly-sync" in open_table and "weekly-report" not in open_table
    assert f"/console/runs/{run.id}/" in open_table and "never materialized" in open_table
    resolved_table = page[page.index('id="resolved-incidents"'):]
    assert "weekly-report" in resolved_table and "recovered" in resolved_table
    assert re.search(r'href="/console/health/"', page)  # in the navigation


def test_health_page__a_bad_page_position_is_400(staff_client):
    assert staff_client.get("/console/health/", {"before": "nonsense"}).status_code == 400


def test_schedule_page__lists_its_incidents_open_first(staff_client):
    tenant = make_tenant("acme")
    schedule = expecting(tenant, name="nightly-export", startWithinSeconds=60)
    make_due(schedule, ago=timedelta(minutes=5))
    health_pass()
    incident = Incident.objects.get()
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    table = page[page.index('id="incidents"'):]
    assert f'data-incident="{incident.id}" class="open"' in table and "late_start" in table


def test_uncertain_effects_page__shows_an_uncertain_alert(staff_client):
    from effects.models import EffectIntent, EffectState
    from scheduler_project.clock import authority_now

    now = authority_now()
    EffectIntent.objects.create(action="alert-abc-1", kind="webhook", target={"url": "https://hooks.example.com/h"},
                                result_key="", result_checksum="", state=EffectState.UNCERTAIN,
                                alert={"tenantId": make_tenant("acme").id, "incidents": [{"incidentId": "inc_1"}]},
                                created_at=now, updated_at=now)
    page = staff_client.get("/console/effects/").content.decode()
    assert "alert-abc-1" in page and "health alert" in page and "1 incidents" in page
