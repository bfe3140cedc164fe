"""The outbox relay: publish-then-mark, failures kept, and the lost-hint backstop."""

import time
from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs.authority import run_once
from runs.models import Outbox
from runs.relay import RELAY_RETRY_SECONDS, relay_pass, republish_lost_hints
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_runs(tenant):
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "overlapPolicy": "allow",
        "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    return [run_once(tenant=tenant, schedule_id=schedule.id)[0] for _ in range(5)]


def test_relay_pass__marks_rows_published_only_after_publish_returned(queued_runs):
    sent = []
    assert relay_pass(sent.extend) == (5, 0)
    assert sorted(hint.run_id for hint in sent) == sorted(r.id for r in queued_runs)
    assert Outbox.objects.filter(published_at__isnull=True).count() == 0
    assert relay_pass(sent.extend) == (0, 0)


def test_relay_pass__broker_refusal_keeps_row_unpublished_with_error(queued_runs):
    def refuse(hints):
        raise ConnectionError("broker down")

    assert relay_pass(refuse) == (0, 5)
    rows = Outbox.objects.all()
    assert all(r.published_at is None and "broker down" in r.last_error for r in rows)
    # The relay lease keeps another pass from retrying at once; once it lapses, rows go out.
    assert relay_pass(lambda hints: None) == (0, 0)
    Outbox.objects.update(relay_until=authority_now() - timedelta(seconds=1))
    assert relay_pass(lambda hints: None) == (5, 0)


def test_relay_pass__a_batch_the_broker_refused_goes_out_a_second_later_not_after_the_relay_lease(queued_runs):
    """A broker restarting while the relay publishes must not hold its hints for the 30 s
    lease that covers a relay dying mid-publish."""
    def refuse(hints):
        raise ConnectionError("Connection refused")

    assert relay_pass(refuse) == (0, 5)
    retry_in = [(r.relay_until - authority_now()).total_seconds() for r in Outbox.objects.all()]
    assert all(0 < seconds <= RELAY_RETRY_SECONDS for seconds in retry_in)
    assert relay_pass(lambda hints: None) == (0, 0)  # not in a busy loop
    time.sleep(RELAY_RETRY_SECONDS)
    assert relay_pass(lambda hints: None) == (5, 0)


def test_republish_lost_hints__only_the_shortfall_against_the_queue(queued_runs, settings):
    relay_pass(lambda hints: None)
    Outbox.objects.update(published_at=authority_now() - timedelta(seconds=settings.RELAY_REPUBLISH_AFTER_SECONDS + 1))
    assert republish_lost_hints(lambda rc: 5) == 0  # all five hints still wait in the queue
    assert republish_lost_hints(lambda rc: 3) == 2  # two were lost
    assert Outbox.objects.filter(published_at__isnull=True).count() == 2
    assert republish_lost_hints(lambda rc: 0) == 3  # the broker lost everything


def test_republish_lost_hints__ignores_recent_and_claimed_hints(queued_runs):
    from runs.authority import claim

    relay_pass(lambda hints: None)
    assert republish_lost_hints(lambda rc: 0) == 0  # published just now: not lost yet
    claim(worker_label="w")
    Outbox.objects.update(published_at=authority_now() - timedelta(hours=1))
    assert republish_lost_hints(lambda rc: 0) == 4  # the claimed run's hint did its job
