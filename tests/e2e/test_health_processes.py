"""Schedule health with real processes: no worker and no scanner runs, two `manage.py
health` loops and `manage.py effects` do; a late start opens one incident within its
expectation plus a loop interval, its alert reaches a real SMTP server process and a
webhook receiver once; one health loop is killed and another started; the workers return
and the incident resolves, told once more."""

import signal
import time
from datetime import timedelta

import pytest

from effects.models import IncidentNotice
from runs.models import Incident
from tests.authority_steps import make_due
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import wait_until
from tests.effects.conftest import Receiver
from tests.effects.helpers import read_mailbox, start_smtp_sink
from tests.factories import make_tenant
from tests.health.steps import claim_all, expecting, materialize
from tests.servers import stop_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]
WITHIN, INTERVAL = 2, 1


@pytest.fixture
def providers(tmp_path, settings):
    mailbox = tmp_path / "mailbox"
    mailbox.mkdir()
    smtp, port = start_smtp_sink(mailbox)
    receiver = Receiver()
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the receiver: an internal one the operator opened
    try:
        yield mailbox, port, receiver
    finally:
        receiver.close()
        stop_process(smtp)


def test_no_workers__one_incident_one_alert_each_then_resolved(processes, providers, tmp_path):
    mailbox, smtp_port, receiver = providers
    processes.env.update({
        "DATABASE_URL": database_url_of_test_db(), "OBJECT_STORE_URL": f"file://{tmp_path}/objects",
        "EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(smtp_port), "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
        "HEALTH_INTERVAL_SECONDS": str(INTERVAL), "HEALTH_DIGEST_SECONDS": "1",
    })
    tenant = make_tenant("acme")
    schedule = expecting(tenant, startWithinSeconds=WITHIN, alert={
        "email": {"to": ["ops@example.com"]}, "webhook": {"url": receiver.url}})
    for name in ("health-a", "health-b"):
        processes.manage(name, "health")
    processes.manage("effects", "effects")
    due = make_due(schedule, ago=timedelta(0))  # its instant is now; nothing will materialize or claim it
    incident = wait_until(lambda: Incident.objects.filter(schedule=schedule).first(), timeout=WITHIN + 15,
                          message="a late_start incident")
    assert incident.kind == "late_start" and incident.instant == due
    assert incident.opened_at - due <= timedelta(seconds=WITHIN + INTERVAL + 3)
    wait_until(lambda: len(read_mailbox(mailbox)) == 1 and len(receiver.requests) == 1, timeout=20,
               message="the alert by mail and webhook")
    processes.signal("health-a", signal.SIGKILL)  # wherever it was in its pass
    processes.manage("health-c", "health")
    time.sleep(3 * INTERVAL)
    assert len(read_mailbox(mailbox)) == 1 and len(receiver.requests) == 1
    assert Incident.objects.filter(schedule=schedule).count() == 1
    # The workers return: the late run starts (late), the next occurrence starts in time.
    claim_all()
    materialize(schedule, ago=timedelta(milliseconds=10))
    claim_all()
    wait_until(lambda: Incident.objects.get(id=incident.id).resolved_at is not None, timeout=15,
               message="the incident resolved")
    wait_until(lambda: len(read_mailbox(mailbox)) == 2 and len(receiver.requests) == 2, timeout=20,
               message="the resolution by mail and webhook")
    time.sleep(3 * INTERVAL)
    assert len(read_mailbox(mailbox)) == 2 and len(receiver.requests) == 2
    assert [r["body"]["incidents"][0]["event"] for r in receiver.requests] == ["opened", "resolved"]
    assert IncidentNotice.objects.count() == 4
    assert Incident.objects.filter(schedule=schedule).count() == 1
