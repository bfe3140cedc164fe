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
    from runs.models import EffectIntent, EffectState
    from kernel.clock import authority_now

    now = authority_now()
    EffectIntent.objects.create(action="alert-abc-1", kind="webhook", target={"url": "https://hooks.example.com/h"},
                                result_key="", result_checksum="", state=EffectState.UNCERTAIN,
                                alert={"tenantId": make_tenant("acme").id, "incidents": [{"incidentId": "inc_1"}]},
                                created_at=now, updated_at=now)
    page = staff_client.get("/console/effects/").content.decode()
    assert "alert-abc-1" in page and "health alert" in page and "1 incidents" in page


def test_schedule_page__draws_each_incident_over_the_time_it_was_open(staff_client):
    tenant = make_tenant("acme")
    schedule = expecting(tenant, name="nightly-export", startWithinSeconds=60)
    run = materialize(schedule, ago=timedelta(minutes=10))
    health_pass()  # late: run's occurrence never claimed
    first = Incident.objects.get()
    resolved_at = first.opened_at + timedelta(seconds=30)
    Incident.objects.filter(id=first.id).update(resolved_at=resolved_at, resolution="recovered")
    make_due(schedule, ago=timedelta(minutes=5))  # the next instant never materialized
    health_pass()
    second = Incident.objects.get(resolved_at__isnull=True)
    page = staff_client.get(f"/console/schedules/{schedule.id}/").content.decode()
    axis = re.search(r'<svg id="occurrence-axis".*?</svg>', page, re.S).group(0)
    bars = re.findall(r'<a href="([^"]*)"><rect class="incident" ([^>]*)><title>([^<]*)</title>', axis)
    assert len(bars) == 2
    drawn = {re.search(r'data-incident="(\w+)"', attributes).group(1): (href, attributes, title)
             for href, attributes, title in bars}

    def utc(moment):
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    href, attributes, title = drawn[first.id]
    assert href == f"/console/runs/{run.id}/"  # its occurrence
    assert 'data-kind="late_start"' in attributes
    assert f'data-opened="{utc(first.opened_at)}" data-resolved="{utc(resolved_at)}"' in attributes
    assert title.startswith("late_start since ") and "resolved " in title and "(recovered)" in title
    assert f"run {run.id}" in title and "occurrence " in title
    href, attributes, title = drawn[second.id]
    assert href == f"#incident-{second.id}" and f'id="incident-{second.id}"' in page  # never materialized: its row
    assert f'data-opened="{utc(second.opened_at)}" data-resolved=""' in attributes
    assert title.startswith("late_start since ") and " · open · occurrence " in title
    # Drawn on the axis's lane for the kind, from opened to resolved (the open one to now).
    assert '>late start</text>' in axis and 'data-kind="late_start"' in page[page.index('id="legend"'):]
    x = {incident_id: float(re.search(r'^x="([\d.]+)"', attributes).group(1))
         for incident_id, (_, attributes, _) in drawn.items()}
    assert x[first.id] <= x[second.id]  # (a yearly schedule: ten years on the axis, minutes apart)
    now_x = float(re.search(r'<line id="now-line" x1="([\d.]+)"', axis).group(1))
    second_width = float(re.search(r'width="([\d.]+)"', drawn[second.id][1]).group(1))
    assert x[second.id] <= now_x <= x[second.id] + second_width + 0.1  # open: up to now
