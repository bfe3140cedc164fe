"""scheduler_open_incidents: open incidents per tenant and kind, never per schedule."""

import re
from datetime import timedelta

import pytest
from django.test import Client

from runs.health.evaluation import health_pass
from tests.authority_steps import make_due
from tests.health.steps import expecting

pytestmark = pytest.mark.django_db


def test_gauge__counts_open_incidents_by_tenant_and_kind(tenant):
    for i in range(3):
        make_due(expecting(tenant, name=f"s{i}", startWithinSeconds=60), ago=timedelta(minutes=5))
    health_pass()
    text = Client().get("/metrics").content.decode()
    lines = [line for line in text.splitlines() if line.startswith("scheduler_open_incidents{")]
    assert 'scheduler_open_incidents{kind="late_start",tenant="acme"} 3.0' in lines
    assert 'scheduler_open_incidents{kind="failures",tenant="acme"} 0.0' in lines
    assert all(set(re.findall(r'(\w+)="', line)) == {"tenant", "kind"} for line in lines)
