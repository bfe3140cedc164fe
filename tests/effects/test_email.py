"""Email effects over real SMTP (an aiosmtpd server process), one delivery at a time."""

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.test import Client

from effects.delivery import effects_pass
from kernel.clock import authority_now, instant
from runs.models import EffectDelivery, EffectIntent, Outbox, Run, StoredObject
from tests.authority_steps import succeeded_run
from tests.effects.helpers import attachments, checksum, read_mailbox
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)

REPORT = b"region,total\nus,42\neu,17\n"


def intent_of(run, verb="send") -> EffectIntent:
    return EffectIntent.objects.get(action=f"{verb}-{run.id}")


def test_email__attaches_canonical_version_under_stable_message_id(tenant, mailbox):
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})
    assert intent_of(run).state == "pending"

    stats = effects_pass()

    assert stats.deliveries == 1 and stats.outcomes == {"sent": 1}
    intent = intent_of(run)
    assert intent.state == "sent" and intent.delivery_count == 1
    [message] = read_mailbox(mailbox)
    assert message["Message-ID"] == f"<send-{run.id}@scheduler.invalid>"
    assert message["To"] == "sales@example.com"
    assert message["Subject"] == f"sales-report: run for {instant(run.scheduled_at)}"
    [(filename, data)] = attachments(message)
    assert data == REPORT and checksum(data) == run.result_checksum
    assert filename.endswith(".csv")
    # The provider's own answer is the external id; the request was recorded before it was made.
    queue_id = intent.external_id.rsplit(" ", 1)[-1]
    assert (mailbox / f"{queue_id}.eml").exists()
    [delivery] = EffectDelivery.objects.filter(intent=intent)
    assert delivery.outcome == "sent" and delivery.finished_at >= delivery.started_at
    assert delivery.request["messageId"] == f"<send-{run.id}@scheduler.invalid>"
    assert delivery.request["attachment"]["size"] == len(REPORT)
    assert effects_pass().deliveries == 0  # sent is settled: never a second send


def test_email__link_instead_of_attachment_serves_exact_version_and_pins_it(tenant, mailbox, settings):
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["ops@example.com"], "attach": False,
                                                                 "subject": "Daily numbers"}})
    effects_pass()

    [message] = read_mailbox(mailbox)
    assert message["Subject"] == "Daily numbers" and attachments(message) == []
    body = message.get_body(("plain",)).get_content()
    [link] = [line for line in body.splitlines() if line.startswith("http://testserver/")]
    response = Client().get(urlsplit(link).path)
    assert response.status_code == 200
    assert b"".join(response.streaming_content if response.streaming else [response.content]) == REPORT
    obj = StoredObject.objects.get(key=run.result_key)
    assert obj.pinned_until >= authority_now() + timedelta(seconds=settings.EFFECT_LINK_TTL_SECONDS - 60)


def test_email__too_large_to_attach_is_linked(tenant, mailbox, settings):
    settings.EFFECT_ATTACH_MAX_BYTES = 10
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["ops@example.com"]}})
    effects_pass()
    [message] = read_mailbox(mailbox)
    assert attachments(message) == []
    assert "http://testserver/api/v1/objects/" in message.get_body(("plain",)).get_content()
    assert "link" in EffectDelivery.objects.get(intent=intent_of(run)).request


def test_email__timeout_after_accept_is_uncertain_and_hold_waits_for_operator(tenant, mailbox):
    # report.sales has the `hold` policy.
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["stall@example.com"]}})

    effects_pass()

    intent = intent_of(run)
    assert intent.state == "uncertain" and intent.next_attempt_at is None
    [delivery] = EffectDelivery.objects.filter(intent=intent)
    assert delivery.outcome == "uncertain" and "after the message was sent" in delivery.detail
    assert len(read_mailbox(mailbox)) == 1  # the provider did get it: exactly why it is not "failed"
    assert effects_pass().deliveries == 0  # held: no second send under any identity
    assert not Outbox.objects.filter(action_key=intent.action).exists()  # intents need no outbox row

    call_command("effects", "resolve", intent.action, "--as", "sent", "--note", "seen in the provider log")

    intent.refresh_from_db()
    assert intent.state == "sent" and "sent (seen in the provider log)" in intent.resolution
    assert effects_pass().deliveries == 0 and len(read_mailbox(mailbox)) == 1


def test_email__hold_then_operator_retry_redelivers_same_message_id(tenant, mailbox):
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["stall-once@example.com"]}})
    effects_pass()
    assert intent_of(run).state == "uncertain"

    call_command("effects", "resolve", f"send-{run.id}", "--as", "retry")
    assert intent_of(run).state == "pending"
    effects_pass()

    intent = intent_of(run)
    assert intent.state == "sent" and intent.delivery_count == 2
    ids = {m["Message-ID"] for m in read_mailbox(mailbox)}
    assert ids == {f"<send-{run.id}@scheduler.invalid>"}  # two copies, one identity: dedupable


def test_email__retry_policy_redelivers_uncertain_with_same_message_id(tenant, mailbox):
    # demo.sleep has the `retry` policy.
    run = succeeded_run(tenant, data=REPORT, job_type="demo.sleep",
                        effects={"email": {"to": ["stall-once@example.com"]}})

    assert effects_pass().outcomes == {"uncertain": 1}
    intent = intent_of(run)
    assert intent.state == "uncertain" and intent.next_attempt_at is not None  # scheduled, not held
    assert effects_pass().outcomes == {"sent": 1}

    intent.refresh_from_db()
    assert intent.state == "sent" and intent.delivery_count == 2
    messages = read_mailbox(mailbox)
    assert [m["Message-ID"] for m in messages] == [f"<send-{run.id}@scheduler.invalid>"] * 2
    assert [attachments(m)[0][1] for m in messages] == [REPORT, REPORT]
    outcomes = list(EffectDelivery.objects.filter(intent=intent).order_by("number").values_list("outcome", flat=True))
    assert outcomes == ["uncertain", "sent"]


def test_email__refused_connection_stays_pending_then_gives_up_as_failed(tenant, mailbox, settings):
    settings.EMAIL_PORT = free_port()  # nothing listens: nothing can reach a provider
    settings.EFFECT_MAX_DELIVERIES = 2
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})

    assert effects_pass().outcomes == {"not_delivered": 1}
    intent = intent_of(run)
    assert intent.state == "pending" and intent.next_attempt_at is not None
    assert effects_pass().outcomes == {"not_delivered": 1}

    intent.refresh_from_db()
    assert intent.state == "failed" and intent.delivery_count == 2
    assert all("connect" in d.detail for d in EffectDelivery.objects.filter(intent=intent))
    assert read_mailbox(mailbox) == []


def test_email__provider_back_after_refusal_delivers(tenant, mailbox, settings, smtp_server):
    settings.EMAIL_PORT = free_port()
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})
    effects_pass()
    assert intent_of(run).state == "pending"
    settings.EMAIL_PORT = smtp_server.port
    effects_pass()
    assert intent_of(run).state == "sent" and len(read_mailbox(mailbox)) == 1


@pytest.mark.parametrize(
    "recipient, state",
    [("reject@example.com", "failed"), ("refuse-data@example.com", "failed"), ("later@example.com", "pending")],
)
def test_email__permanent_refusal_fails_temporary_refusal_retries(tenant, mailbox, recipient, state):
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": [recipient]}})
    effects_pass()
    assert intent_of(run).state == state
    assert read_mailbox(mailbox) == []


def test_email__expired_result_fails_without_contacting_provider(tenant, mailbox):
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})
    StoredObject.objects.filter(key=run.result_key).update(state="deleted")
    effects_pass()
    intent = intent_of(run)
    assert intent.state == "failed"
    assert "expired" in EffectDelivery.objects.get(intent=intent).detail
    assert read_mailbox(mailbox) == []


def test_resolve__refuses_settled_intents_and_unknown_actions(tenant, mailbox):
    from django.core.management.base import CommandError

    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})
    effects_pass()
    with pytest.raises(CommandError, match="cannot be resolved"):
        call_command("effects", "resolve", f"send-{run.id}", "--as", "retry")
    with pytest.raises(CommandError, match="no effect intent"):
        call_command("effects", "resolve", "send-run_nope", "--as", "sent")


def test_email__attachment_and_link_carry_the_jobs_file_name(tenant, mailbox):
    attached = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["a@example.com"]}})
    linked = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["b@example.com"], "attach": False}})
    StoredObject.objects.filter(run__in=[attached, linked]).update(filename="sales-us-2026-12-02.csv")

    effects_pass()

    by_recipient = {message["To"]: message for message in read_mailbox(mailbox)}
    [(filename, _)] = attachments(by_recipient["a@example.com"])
    assert filename == "sales-us-2026-12-02.csv"
    body = by_recipient["b@example.com"].get_body(("plain",)).get_content()
    [link] = [line for line in body.splitlines() if line.startswith("http://testserver/")]
    response = Client().get(urlsplit(link).path)
    assert response["Content-Disposition"] == 'attachment; filename="sales-us-2026-12-02.csv"'


def _body(message) -> str:
    return message.get_body(("plain",)).get_content()


def test_email__a_manual_run_is_not_called_scheduled(tenant, mailbox):
    from runs import authority
    from tests.authority_steps import publish, report_schedule, stage

    scheduled = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["scheduled@example.com"]}})
    schedule = report_schedule(tenant, name="on-demand", effects={"email": {"to": ["manual@example.com"]}})
    manual, _ = authority.run_once(tenant=tenant, schedule_id=schedule.id)
    claimed = authority.claim(worker_label="test-worker", lease_seconds=60)
    assert claimed.id == manual.id
    publish(claimed, stage(claimed, REPORT))

    effects_pass()

    by_recipient = {message["To"]: message for message in read_mailbox(mailbox)}
    manual_mail, scheduled_mail = by_recipient["manual@example.com"], by_recipient["scheduled@example.com"]
    assert "scheduled run" not in _body(manual_mail) and "scheduled for" not in _body(manual_mail)
    assert _body(manual_mail).startswith(f"The manual run {manual.id} of on-demand (run once on request, for ")
    assert manual_mail["Subject"] == f"on-demand: manual run for {instant(claimed.scheduled_at)}"
    assert _body(scheduled_mail).startswith(f"The scheduled run {scheduled.id} of sales-report (scheduled for ")


def test_email__a_name_saved_with_control_characters_still_gives_a_sendable_subject(tenant, mailbox):
    """A name saved before control and format characters were refused: the default subject
    carries spaces in their place, and the mail is sent once (never a retried BadHeaderError)."""
    run = succeeded_run(tenant, data=REPORT, effects={"email": {"to": ["sales@example.com"]}})
    legacy = "Weekly\r\nBcc: victim@example.com\x07\u202e"
    Run.objects.filter(id=run.id).update(payload={**run.payload, "scheduleName": legacy})

    assert effects_pass().outcomes == {"sent": 1}

    [message] = read_mailbox(mailbox)
    assert message["Subject"] == f"Weekly  Bcc: victim@example.com  : run for {instant(run.scheduled_at)}"
    assert message["Bcc"] is None and message["To"] == "sales@example.com"
