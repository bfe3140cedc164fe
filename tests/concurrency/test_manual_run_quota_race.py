"""Two run-once requests of one tenant on two connections at once, with room for one more
manual run: the tenant lock lets exactly one through."""

import pytest

from runs.models import Run, Trigger
from tests.api.conftest import CRON_BODY
from tests.concurrency.harness import race
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_once__concurrent_requests_cannot_both_take_the_last_slot(sessions):
    tenant = make_tenant("limited", max_pending_manual_runs=1)
    client = api_client(tenant)
    # Two schedules: their own row locks would not serialize the requests.
    first, second = (client.post("/api/v1/schedules", {**CRON_BODY, "name": name}).json()["scheduleId"]
                     for name in ("a", "b"))

    def request(schedule_id):
        return lambda: api_client(tenant).post(f"/api/v1/schedules/{schedule_id}/runs", {}).status_code

    for _ in range(5):
        Run.objects.filter(tenant=tenant).delete()
        outcomes = race((sessions("a"), request(first)), (sessions("b"), request(second)))
        assert sorted(o.value for o in outcomes) == [201, 429], [o.error for o in outcomes]
        assert Run.objects.filter(tenant=tenant, trigger=Trigger.MANUAL).count() == 1
