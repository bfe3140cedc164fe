"""Health evaluators racing, each on its own PostgreSQL connection: still one incident per
breach and one open incident per schedule and kind."""

from datetime import timedelta

import pytest
from django.db import connection

from runs.health.evaluation import health_pass
from runs.models import Incident
from tests.authority_steps import make_due
from tests.concurrency.harness import race
from tests.factories import make_tenant
from tests.health.steps import expecting, later

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="races need PostgreSQL sessions")


def test_two_evaluators__one_incident_per_breach(sessions):
    tenant = make_tenant("acme")
    schedules = [expecting(tenant, name=f"s{i}", startWithinSeconds=60) for i in range(40)]
    for schedule in schedules:
        make_due(schedule, ago=timedelta(minutes=5))
    a, b, c = sessions("health-a"), sessions("health-b"), sessions("health-c")
    reported = []
    for _ in range(3):
        outcomes = race((a, health_pass), (b, health_pass), (c, health_pass))
        assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes]
        reported.append(sum(sum(outcome.value.opened.values()) for outcome in outcomes))
    assert reported == [40, 0, 0]  # each breach reported by exactly one evaluator, once
    assert Incident.objects.count() == 40
    assert set(Incident.objects.values_list("schedule_id", flat=True)) == {s.id for s in schedules}


def test_two_evaluators__resolve_and_reopen_never_duplicate(sessions):
    tenant = make_tenant("acme")
    schedule = expecting(tenant, startWithinSeconds=60)
    make_due(schedule, ago=timedelta(minutes=5))
    a, b = sessions("health-a"), sessions("health-b")
    # One pass reads the clock far ahead of the other: the incident still resolves after it opened.
    ahead = later(3600)
    outcomes = race((a, lambda: health_pass(now=ahead)), (b, health_pass))
    assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes]
    assert Incident.objects.filter(resolved_at__isnull=True).count() == 1
    assert Incident.objects.count() == 1
