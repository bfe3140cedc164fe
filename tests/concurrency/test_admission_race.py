"""Admission of strict schedules from two tenants at once, over two real PostgreSQL sessions
(HTTP requests, each on its own connection): two promises that each fit alone but not
together are never both admitted."""

import pytest

from runs.capacity.live import slots_report
from runs.models import Run
from schedules.models import Schedule
from tests.authority_steps import create_schedule
from tests.concurrency.harness import race
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

DAILY_9 = {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}


def strict_request(tenant):
    body = {"name": "strict", "jobType": "demo.sleep", "params": {"seconds": 0}, "recurrence": DAILY_9,
            "startDeadlineSeconds": 5}
    return lambda: api_client(tenant).post("/api/v1/schedules", body)


def test_two_tenants_admitting_strict_schedules_that_fit_only_one_at_a_time__exactly_one_is_409(sessions):
    # Five-second runs at 09:00 on 10 slots: the 11th to 20th start at 5 s (within 5), the 21st
    # at 10 s. With 18 ordinary ones, one strict schedule starts within 5 s; two cannot both.
    ordinary = make_tenant("ordinary", max_schedules=100)
    for i in range(18):
        create_schedule(ordinary, name=f"wave-{i}", cron="0 9 * * *")
    slots_report("worker:test:1", {"short": 10})
    a, b = make_tenant("a"), make_tenant("b")

    outcomes = race((sessions("tenant-a"), strict_request(a)), (sessions("tenant-b"), strict_request(b)))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    statuses = sorted(o.value.status_code for o in outcomes)
    assert statuses == [201, 409], [o.value.content for o in outcomes]
    [refused] = [o.value.json()["error"] for o in outcomes if o.value.status_code == 409]
    assert refused["code"] == "deadline_infeasible" and refused["details"]["predictedP99Seconds"] == 10
    assert Schedule.objects.filter(name="strict").count() == 1 and not Run.objects.exists()
