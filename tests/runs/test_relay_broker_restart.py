"""A broker restart without persistence loses every hint it held: the next relay step sees a
new broker incarnation and republishes them at once, not after the time-based backstop.
Against a real redis-server this test starts and restarts."""

import pytest
import redis

from runs.authority import run_once
from runs.models import Outbox
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from tests.servers import broker
from workers.hint_publisher import broker_epoch, republish_and_relay

pytestmark = pytest.mark.django_db


def test_relay_step__broker_restarted__lost_hints_republished_at_once(tenant, private_redis, settings):
    settings.RELAY_REPUBLISH_AFTER_SECONDS = 3600  # the time-based backstop cannot be what helps
    settings.CLAIM_BATCH = {}  # one message per hint, so the queue's length counts hints
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    runs = [run_once(tenant=tenant, schedule_id=schedule.id)[0] for _ in range(5)]
    client = lambda: redis.Redis.from_url(private_redis.url)  # noqa: E731
    with broker(private_redis.url):
        assert republish_and_relay() == 5
        first = broker_epoch()
        assert client().llen("short") == 5
        assert set(Outbox.objects.values_list("broker_epoch", flat=True)) == {first}

        private_redis.restart()  # every hint is gone with it
        assert client().llen("short") == 0

        assert republish_and_relay() == 5
        assert broker_epoch() != first and client().llen("short") == 5
        assert republish_and_relay() == 0  # same incarnation: nothing lost, nothing sent twice
        assert client().llen("short") == 5
    assert sorted(Outbox.objects.values_list("run_id", flat=True)) == sorted(r.id for r in runs)
