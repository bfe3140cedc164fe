"""endAfterOccurrences under concurrent scanners: each its own PostgreSQL session, the count
is kept by the transaction that holds the schedule's lock, so exactly N rule instants are
materialized however the scanners interleave."""

from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs import authority
from runs.models import Run
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from tests.concurrency.harness import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_four_scanners__end_after_250__exactly_250_materialized(tenant, sessions):
    schedules = []
    for i, left in enumerate((250, 7, 1)):
        schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": f"s{i}", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "interval", "everySeconds": 1, "anchor": "2020-01-01T00:00:00Z"},
            "misfirePolicy": "run_all", "overlapPolicy": "allow", "endAfterOccurrences": left}))
        schedules.append((schedule, left))
    first = (authority_now() - timedelta(hours=1)).replace(microsecond=0)
    Schedule.objects.filter(id__in=[s.id for s, _ in schedules]).update(next_run_at=first)

    def scan_until_nothing_due():
        for _ in range(200):
            authority.materialize_due(batch_size=2)
            if not Schedule.objects.filter(next_run_at__lte=authority_now()).exists():
                return
        raise AssertionError("scanner never finished")

    outcomes = race(*[(sessions(f"scanner-{i}"), scan_until_nothing_due) for i in range(4)])

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    for schedule, left in schedules:
        instants = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at")
                        .values_list("scheduled_at", flat=True))
        assert instants == [first + timedelta(seconds=k) for k in range(left)]
        stored = Schedule.objects.get(id=schedule.id)
        assert (stored.occurrences_materialized, stored.next_run_at) == (left, None)
