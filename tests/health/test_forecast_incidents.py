"""Forecast incidents: opened at least 5 minutes before an instant the capacity forecast
predicts will start later than startWithinSeconds; resolved when the forecast recovers or
the instant passes."""

from datetime import timedelta

import pytest

from runs.capacity.live import slots_report, slots_withdraw
from runs.health.evaluation import health_pass
from runs.models import Incident
from schedules.models import Schedule
from kernel.clock import authority_now
from tests.authority_steps import create_schedule
from tests.factories import make_tenant
from tests.health.steps import expecting

pytestmark = pytest.mark.django_db


def due_in(schedule, seconds):
    at = (authority_now() + timedelta(seconds=seconds)).replace(microsecond=0)
    Schedule.objects.filter(id=schedule.id).update(next_run_at=at)
    return at


def test_no_slots__the_next_instant_is_at_risk_before_it_comes(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    at = due_in(schedule, 7 * 60)
    stats = health_pass()
    assert stats.opened == {"forecast": 1}
    incident = Incident.objects.get()
    assert incident.instant == at and incident.run_id is None
    assert (at - incident.opened_at) >= timedelta(minutes=5)
    assert incident.detail["predictedLatenessSeconds"] is None  # nothing would ever start it
    assert not health_pass().opened  # one incident of this instant


def test_too_close_or_too_far__no_forecast_incident(tenant, settings):
    settings.HEALTH_FORECAST_AHEAD_SECONDS = 600
    near = expecting(tenant, name="near", startWithinSeconds=60)
    far = expecting(tenant, name="far", startWithinSeconds=60)
    due_in(near, 2 * 60)  # under 5 minutes ahead: not forecast (late_start will watch it)
    due_in(far, 60 * 60)
    assert not health_pass().opened


def test_slots_arrive__the_forecast_recovers_and_resolves_it(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    due_in(schedule, 7 * 60)
    health_pass()
    slots_report("worker-a", {"short": 4, "long": 4, "memory": 4})
    try:
        assert health_pass().resolved == {"forecast": 1}
    finally:
        slots_withdraw("worker-a")
    assert Incident.objects.get().resolution == "recovered"


def test_the_instant_passes__resolved(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    at = due_in(schedule, 7 * 60)
    health_pass()
    stats = health_pass(now=at + timedelta(seconds=1))
    assert stats.resolved.get("forecast") == 1
    assert Incident.objects.get(kind="forecast").resolution == "instant_passed"


def test_per_schedule__fair_share_starts_a_light_tenant_on_time_in_a_heavy_wave(tenant, settings):
    """Two slots, one wave of 30-second runs: the heavy tenant's ten queue behind each other,
    while the claim serves the light tenant's one by fair share among the first two: only the
    heavy tenant's schedule is at risk (the class's whole wave is late at p99)."""
    settings.CAPACITY_DEFAULT_DURATION_SECONDS = 30
    heavy = expecting(tenant, name="heavy", startWithinSeconds=60)
    light = expecting(make_tenant("light"), name="light", startWithinSeconds=60)
    at = due_in(heavy, 7 * 60)
    for n in range(9):
        Schedule.objects.filter(id=create_schedule(tenant, name=f"heavy-{n}").id).update(next_run_at=at)
    Schedule.objects.filter(id=light.id).update(next_run_at=at)
    slots_report("worker-a", {"short": 2})
    try:
        assert health_pass().opened == {"forecast": 1}
        incident = Incident.objects.get()
        assert incident.schedule_id == heavy.id and incident.detail["predictedLatenessSeconds"] > 60
        slots_report("worker-a", {"short": 10})  # the whole wave starts at once: recovered
        assert health_pass().resolved == {"forecast": 1}
    finally:
        slots_withdraw("worker-a")
