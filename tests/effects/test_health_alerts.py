"""Health alerts delivered by the effects machinery to a real SMTP server process and a
real webhook receiver: one message per target on open and one on resolve, never twice, and
one digest listing every incident when many open at once."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from effects.alerts import alerts_pass
from effects.delivery import effects_pass
from effects.models import IncidentNotice
from runs.health.evaluation import health_pass
from runs.models import EffectIntent, EffectState, Incident
from tests.authority_steps import make_due
from tests.effects.helpers import read_mailbox
from tests.health.steps import claim_all, expecting, materialize

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alert(receiver, settings):
    settings.HEALTH_DIGEST_SECONDS = 1
    return {"email": {"to": ["ops@example.com"]}, "webhook": {"url": receiver.url}}


def deliver_all():
    while effects_pass():
        pass


def next_window():
    time.sleep(1.05)  # HEALTH_DIGEST_SECONDS = 1


def test_late_start__one_alert_on_open_and_one_on_resolve_to_each_target(tenant, mailbox, receiver, alert):
    schedule = expecting(tenant, startWithinSeconds=60, alert=alert)
    make_due(schedule, ago=timedelta(minutes=3))  # nothing materialized it: no scanner
    health_pass()
    assert alerts_pass() == 2
    deliver_all()
    (message,) = read_mailbox(mailbox)
    assert "late_start incident opened" in message["Subject"]
    incident = Incident.objects.get()
    assert incident.id in message.get_content()
    (hook,) = receiver.requests
    assert hook["body"]["type"] == "schedule_health"
    assert [(line["incidentId"], line["event"], line["kind"]) for line in hook["body"]["incidents"]] == [
        (incident.id, "opened", "late_start")]
    assert hook["headers"]["Idempotency-Key"] == hook["body"]["action"]
    next_window()
    assert alerts_pass() == 0 and not effects_pass()  # told once: nothing more
    # The workers return; the next occurrence starts in time and resolves the incident.
    claim_all()
    materialize(schedule)
    claim_all()
    assert health_pass().resolved == {"late_start": 1}
    assert alerts_pass() == 2
    deliver_all()
    assert len(read_mailbox(mailbox)) == 2 and len(receiver.requests) == 2
    assert "resolved" in read_mailbox(mailbox)[1]["Subject"]
    assert receiver.requests[1]["body"]["incidents"][0]["resolution"] == "recovered"
    next_window()
    assert alerts_pass() == 0
    assert set(EffectIntent.objects.values_list("state", flat=True)) == {EffectState.SENT}
    assert IncidentNotice.objects.count() == 4


def test_an_outage_on_many_schedules__one_digest_per_target(tenant, mailbox, receiver, alert):
    schedules = [expecting(tenant, name=f"s{i}", startWithinSeconds=60, alert=alert) for i in range(30)]
    for schedule in schedules:
        make_due(schedule, ago=timedelta(minutes=3))
    assert health_pass().opened == {"late_start": 30}
    assert alerts_pass() == 2
    deliver_all()
    (message,) = read_mailbox(mailbox)
    assert message["Subject"] == "Schedule health: 30 incidents opened, 0 resolved"
    assert message.get_content().count("late_start opened") == 30
    (hook,) = receiver.requests
    assert len(hook["body"]["incidents"]) == 30


def test_incidents_opening_within_a_window_wait_for_the_next_one(tenant, mailbox, receiver, alert, settings):
    settings.HEALTH_DIGEST_SECONDS = 3600  # one message per target per hour
    first = expecting(tenant, name="a", startWithinSeconds=60, alert=alert)
    second = expecting(tenant, name="b", startWithinSeconds=60, alert=alert)
    make_due(first, ago=timedelta(minutes=3))
    health_pass()
    assert alerts_pass() == 2
    make_due(second, ago=timedelta(minutes=3))
    health_pass()
    assert alerts_pass() == 0  # this window's message was sent: the next one lists it
    assert not IncidentNotice.objects.filter(incident__schedule=second).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="racing digests need PostgreSQL sessions")
def test_two_digests_racing__each_event_told_once(tenant, mailbox, receiver, alert):
    for i in range(20):
        make_due(expecting(tenant, name=f"s{i}", startWithinSeconds=60, alert=alert), ago=timedelta(minutes=3))
    health_pass()
    barrier = threading.Barrier(3)
    created = []

    def digest():
        try:
            barrier.wait(10)
            created.append(alerts_pass())
        finally:
            connection.close()

    threads = [threading.Thread(target=digest) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(created) >= 2
    next_window()
    while alerts_pass():
        next_window()
    assert IncidentNotice.objects.count() == 40  # 20 incidents x 2 targets, each told once
    deliver_all()
    told = [line["incidentId"] for request in receiver.requests for line in request["body"]["incidents"]]
    assert len(told) == len(set(told)) == 20
