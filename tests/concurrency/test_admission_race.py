"""Admission of strict schedules from two tenants at once, over two real database sessions
(HTTP requests, each on its own connection): two promises that each fit alone but not
together are never both admitted. Each admission computes its forecast outside any
transaction; the second to confirm finds the class's admission epoch moved and computes it
again, seeing the first."""

import pytest

from runs.capacity.live import slots_report
from runs.models import Run
from schedules.models import Schedule
from tests.concurrency.harness import race
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

DAILY_9 = {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}


def strict_request(tenant):
    body = {"name": "strict", "jobType": "demo.sleep", "params": {"seconds": 0}, "recurrence": DAILY_9,
            "startDeadlineSeconds": 4}
    return lambda: api_client(tenant).post("/api/v1/schedules", body)


def test_two_tenants_admitting_strict_schedules_that_fit_only_one_at_a_time__exactly_one_is_409(sessions):
    # Two slots and five-second runs at 09:00. Alone, a strict schedule's run and the occurrence
    # admission checks (served after it) both start at once. Together, the claim gives each
    # tenant one slot: whoever is checked second waits 5 s for the occurrence checked, and
    # pushes the other's past its 4 s deadline too.
    slots_report("worker:test:1", {"short": 2})
    a, b = make_tenant("a"), make_tenant("b")

    outcomes = race((sessions("tenant-a"), strict_request(a)), (sessions("tenant-b"), strict_request(b)))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    statuses = sorted(o.value.status_code for o in outcomes)
    assert statuses == [201, 409], [o.value.content for o in outcomes]
    [refused] = [o.value.json()["error"] for o in outcomes if o.value.status_code == 409]
    assert refused["code"] == "deadline_infeasible", refused
    assert Schedule.objects.filter(name="strict").count() == 1 and not Run.objects.exists()
