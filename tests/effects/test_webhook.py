"""Webhook effects against a real HTTP receiver on 127.0.0.1."""

from urllib.parse import urlsplit

import pytest
from django.test import Client

from effects.delivery import effects_pass
from runs.models import EffectDelivery, EffectIntent
from tests.authority_steps import succeeded_run
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)

REPORT = b"region,total\nus,42\n"


def hook(run) -> EffectIntent:
    return EffectIntent.objects.get(action=f"post-{run.id}")


def test_webhook__posts_result_with_idempotency_key(tenant, receiver):
    run = succeeded_run(tenant, data=REPORT, effects={"webhook": {"url": receiver.url}})

    assert effects_pass().outcomes == {"sent": 1}

    [request] = receiver.requests
    assert request["path"] == "/hooks/report"
    assert request["headers"]["Idempotency-Key"] == f"post-{run.id}"
    body = request["body"]
    assert body["action"] == f"post-{run.id}" and body["runId"] == run.id
    assert body["trigger"] == "schedule"
    assert body["checksum"] == run.result_checksum and body["size"] == len(REPORT)
    response = Client().get(urlsplit(body["resultUrl"]).path)
    assert b"".join(response.streaming_content) == REPORT
    intent = hook(run)
    assert intent.state == "sent" and intent.external_id == "hook-1"
    assert EffectDelivery.objects.get(intent=intent).request["idempotencyKey"] == f"post-{run.id}"


def test_webhook__email_and_webhook_are_separate_intents(tenant, receiver, mailbox):
    run = succeeded_run(tenant, data=REPORT, effects={"webhook": {"url": receiver.url},
                                                      "email": {"to": ["sales@example.com"]}})
    effects_pass()
    assert sorted(EffectIntent.objects.filter(run=run).values_list("action", "state")) == [
        (f"post-{run.id}", "sent"), (f"send-{run.id}", "sent"),
    ]


def test_webhook__read_timeout_is_uncertain_and_retry_reuses_the_key(tenant, receiver):
    receiver.script = [(200, 3.0)]  # the receiver processes it but answers too late
    run = succeeded_run(tenant, data=REPORT, job_type="demo.sleep",  # `retry` policy
                        effects={"webhook": {"url": receiver.url}})

    assert effects_pass().outcomes == {"uncertain": 1}
    assert hook(run).state == "uncertain"
    assert effects_pass().outcomes == {"sent": 1}

    assert [r["headers"]["Idempotency-Key"] for r in receiver.requests] == [f"post-{run.id}"] * 2
    intent = hook(run)
    assert intent.state == "sent" and intent.delivery_count == 2 and intent.external_id == "hook-2"


def test_webhook__read_timeout_under_hold_waits(tenant, receiver):
    receiver.script = [(200, 3.0)]
    run = succeeded_run(tenant, data=REPORT, effects={"webhook": {"url": receiver.url}})  # report.sales: hold
    effects_pass()
    assert hook(run).state == "uncertain" and hook(run).next_attempt_at is None
    assert effects_pass().deliveries == 0 and len(receiver.requests) == 1


@pytest.mark.parametrize("status, state", [(503, "pending"), (429, "pending"), (400, "failed"), (404, "failed")])
def test_webhook__server_errors_retry_client_errors_fail(tenant, receiver, status, state):
    receiver.script = [(status, 0.0)]
    run = succeeded_run(tenant, data=REPORT, effects={"webhook": {"url": receiver.url}})
    assert effects_pass().outcomes == {("failed" if state == "failed" else "not_delivered"): 1}
    assert hook(run).state == state


def test_webhook__refused_connection_stays_pending(tenant):
    run = succeeded_run(tenant, data=REPORT,
                        effects={"webhook": {"url": f"http://127.0.0.1:{free_port()}/hook"}})
    effects_pass()
    intent = hook(run)
    assert intent.state == "pending" and intent.next_attempt_at is not None
    assert "connect" in EffectDelivery.objects.get(intent=intent).detail
