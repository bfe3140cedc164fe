"""`manage.py effects` as real processes: a crash mid-request leaves evidence, and two
adapters running at once never deliver one delivery twice."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from effects.delivery import PassStats, claim_next_delivery
from kernel.clock import authority_now
from runs.models import EffectDelivery, EffectIntent
from tests.authority_steps import succeeded_run
from tests.child_env import database_url_of_test_db
from tests.effects.helpers import ROOT, read_mailbox

pytestmark = pytest.mark.django_db(transaction=True)

REPORT = b"region,total\nus,42\n"


@pytest.fixture
def effect_process(settings, smtp_server, tmp_path):
    children = []

    def start(name: str):
        env = dict(
            os.environ,
            DATABASE_URL=database_url_of_test_db(),
            OBJECT_STORE_URL=settings.OBJECT_STORE_URL,
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(smtp_server.port),
            EFFECT_TIMEOUT_SECONDS="1",
            EFFECT_BACKOFF_SECONDS="0",
            EFFECT_BACKOFF_MAX_SECONDS="0",
            PYTHONUNBUFFERED="1",
        )
        log = open(tmp_path / f"{name}.log", "wb")
        child = subprocess.Popen([sys.executable, "manage.py", "effects", "--interval", "0.2"], cwd=ROOT, env=env,
                                 stdout=log, stderr=subprocess.STDOUT)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_effects_process__recovers_a_delivery_abandoned_mid_request(tenant, mailbox, effect_process):
    # demo.sleep: `retry` policy. Another adapter claimed the delivery and died before any outcome.
    run = succeeded_run(tenant, data=REPORT, job_type="demo.sleep", effects={"email": {"to": ["ops@example.com"]}})
    abandoned = claim_next_delivery(PassStats())
    assert abandoned is not None and abandoned.number == 1
    EffectIntent.objects.filter(id=abandoned.intent_id).update(next_attempt_at=authority_now() - timedelta(seconds=1))

    effect_process("effects-1")
    wait_for(lambda: EffectIntent.objects.get(id=abandoned.intent_id).state == "sent")

    deliveries = list(EffectDelivery.objects.filter(intent_id=abandoned.intent_id).order_by("number"))
    assert [(d.number, d.outcome) for d in deliveries] == [(1, "uncertain"), (2, "sent")]
    assert "deadline" in deliveries[0].detail
    [message] = read_mailbox(mailbox)
    assert message["Message-ID"] == f"<send-{run.id}@scheduler.invalid>"


def test_effects_processes__two_adapters_deliver_each_intent_once(tenant, mailbox, effect_process):
    runs = [succeeded_run(tenant, data=REPORT + str(i).encode(), name=f"report-{i}",
                          effects={"email": {"to": ["sales@example.com"]}}) for i in range(8)]
    effect_process("effects-1")
    effect_process("effects-2")
    wait_for(lambda: EffectIntent.objects.filter(state="sent").count() == len(runs))

    assert all(intent.delivery_count == 1 for intent in EffectIntent.objects.all())
    ids = sorted(m["Message-ID"] for m in read_mailbox(mailbox))
    assert ids == sorted(f"<send-{run.id}@scheduler.invalid>" for run in runs)
