"""Only a committed canonical publication creates an effect, and the API shows report and
effect state separately ("report ready, email pending")."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from effects.delivery import effects_pass
from kernel.errors import StaleFence
from runs import authority
from runs.models import EffectIntent, ObjectState, StoredObject
from tests.authority_steps import expire_lease, publish, report_schedule, stage, start_run, succeeded_run
from tests.effects.helpers import attachments, checksum, read_mailbox
from tests.factories import api_client

pytestmark = pytest.mark.django_db(transaction=True)

STALE = b"region,total\nus,999999\n"
CANONICAL = b"region,total\nus,42\n"


def test_stale_worker_output_is_never_mailed(tenant, mailbox):
    schedule = report_schedule(tenant, effects={"email": {"to": ["sales@example.com"]}})
    run = start_run(schedule)
    a_attempt, a_fence = run.current_attempt_id, run.fence
    a_object = stage(run, STALE)  # worker A uploads, then stalls past its lease
    expire_lease(run.id)
    assert authority.sweep_expired_leases() == 1
    authority.promote_due_runs()
    replacement = authority.claim(worker_label="worker-b")
    assert replacement.id == run.id and replacement.fence == a_fence + 1
    publish(replacement, stage(replacement, CANONICAL))

    with pytest.raises(StaleFence):  # A resumes and tries to complete
        publish(run, a_object, attempt_id=a_attempt, fence=a_fence)
    effects_pass()

    [intent] = EffectIntent.objects.filter(run=run)
    assert intent.action == f"send-{run.id}" and intent.result_checksum == checksum(CANONICAL)
    assert intent.result_version_id != a_object.version_id
    [message] = read_mailbox(mailbox)
    assert attachments(message)[0][1] == CANONICAL
    assert StoredObject.objects.get(id=a_object.id).state == ObjectState.STAGED  # an orphan, never referenced


def test_failed_run_creates_no_effect(tenant, mailbox):
    schedule = report_schedule(tenant, effects={"email": {"to": ["sales@example.com"]}})
    run = start_run(schedule)
    authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                       error="bad query", retryable=False)
    assert effects_pass().deliveries == 0
    assert not EffectIntent.objects.exists() and read_mailbox(mailbox) == []


def test_api__report_ready_email_pending_then_sent(tenant, mailbox):
    run = succeeded_run(tenant, data=CANONICAL, effects={"email": {"to": ["sales@example.com"]}})
    client = api_client(tenant)

    before = client.get(f"/api/v1/runs/{run.id}").json()
    assert before["state"] == "succeeded" and before["result"]["checksum"] == checksum(CANONICAL)
    assert [(e["action"], e["kind"], e["state"]) for e in before["effects"]] == [
        (f"send-{run.id}", "email", "pending")
    ]
    effects_pass()
    after = client.get(f"/api/v1/runs/{run.id}").json()
    assert after["state"] == "succeeded"
    assert [e["state"] for e in after["effects"]] == ["sent"]


def test_api__uncertain_email_is_visible_and_admin_can_resolve(tenant, mailbox):
    run = succeeded_run(tenant, data=CANONICAL, effects={"email": {"to": ["stall@example.com"]}})
    effects_pass()
    client = api_client(tenant)
    assert [e["state"] for e in client.get(f"/api/v1/runs/{run.id}").json()["effects"]] == ["uncertain"]

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    intent = EffectIntent.objects.get(run=run)
    response = admin.post("/admin/runs/effectintent/",
                          {"action": "resolve_failed", "_selected_action": [intent.id], "index": 0}, follow=True)
    assert response.status_code == 200
    intent.refresh_from_db()
    assert intent.state == "failed" and "admin:root: failed" in intent.resolution
    assert [e["state"] for e in client.get(f"/api/v1/runs/{run.id}").json()["effects"]] == ["failed"]
    assert admin.get(f"/admin/runs/effectintent/{intent.id}/change/").status_code == 200


def test_replayed_success_mails_once(tenant, mailbox):
    """A replay is the same occurrence: its success publishes the occurrence's one effect
    (send-<runId>), mailed once however often delivery passes run."""
    schedule = report_schedule(tenant, effects={"email": {"to": ["sales@example.com"]}})
    run = start_run(schedule)
    failed = dict(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                  error="upstream down", retryable=False)
    authority.complete(**failed)
    authority.run_replay(tenant=tenant, run_id=run.id, note="upstream fixed")
    replayed = authority.claim(worker_label="worker-b")
    assert replayed.id == run.id and replayed.fence == run.fence + 1
    publish(replayed, stage(replayed, CANONICAL))
    authority.complete(**failed)  # the failed attempt's repeated completion changes nothing
    effects_pass()
    effects_pass()

    [intent] = EffectIntent.objects.filter(run=run)
    assert intent.action == f"send-{run.id}" and intent.result_checksum == checksum(CANONICAL)
    [message] = read_mailbox(mailbox)
    assert attachments(message)[0][1] == CANONICAL
