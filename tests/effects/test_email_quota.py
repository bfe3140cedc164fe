"""The per-tenant cap on email recipients per UTC day: past it, an email effect fails with
reason quota_exceeded and nothing is sent."""

import pytest

from effects.delivery import effects_pass
from effects.models import EmailUsage
from effects.quota import email_recipients_take
from kernel.clock import authority_now
from runs.models import EffectDelivery, EffectIntent
from tests.authority_steps import succeeded_run
from tests.effects.helpers import read_mailbox
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

TWO = ["a@example.com", "b@example.com"]


def test_email__over_the_daily_cap_fails_with_quota_exceeded_and_sends_nothing(mailbox):
    tenant = make_tenant("mailer", max_emails_per_day=3)
    first = succeeded_run(tenant, effects={"email": {"to": TWO}}, name="first")
    second = succeeded_run(tenant, effects={"email": {"to": TWO}}, name="second")

    stats = effects_pass()
    assert stats.outcomes == {"sent": 1} and stats.settled == 1  # the second was never submitted

    assert len(read_mailbox(mailbox)) == 1
    sent, refused = (EffectIntent.objects.get(action=f"send-{run.id}") for run in (first, second))
    assert (sent.state, sent.reason) == ("sent", "")
    assert (refused.state, refused.reason) == ("failed", "quota_exceeded")
    assert EffectDelivery.objects.get(intent=refused).detail.startswith("not submitted")
    assert EmailUsage.objects.get(tenant=tenant).recipients == 2
    effects = api_client(tenant).get(f"/api/v1/runs/{second.id}").json()["effects"]
    assert effects == [{"action": f"send-{second.id}", "kind": "email", "state": "failed",
                        "reason": "quota_exceeded"}]
    assert effects_pass().deliveries == 0  # failed is settled: no retry


def test_email_quota__counts_per_tenant_and_never_past_the_cap(db):
    tenant, other = make_tenant("mailer", max_emails_per_day=5), make_tenant("other", max_emails_per_day=5)
    now = authority_now()
    assert [email_recipients_take(tenant.id, 2, now) for _ in range(3)] == [True, True, False]
    assert email_recipients_take(tenant.id, 1, now)  # exactly to the cap
    assert not email_recipients_take(tenant.id, 1, now)
    assert email_recipients_take(other.id, 5, now)
    assert not email_recipients_take(other.id, 6, now)
    assert EmailUsage.objects.get(tenant=tenant).recipients == 5
