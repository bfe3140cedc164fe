"""Which intent a delivery claim takes, and what one pass may do: due order, held and
future intents passed over, and settling without a request bounded like deliveries."""

from datetime import timedelta

import pytest

from effects.delivery import PassStats, claim_next_delivery, effects_pass
from kernel.clock import authority_now
from runs.models import EffectDelivery, EffectIntent, EffectState
from tests.authority_steps import succeeded_run

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"email": {"to": ["sales@example.com"]}}


def intents(tenant, n: int) -> list[EffectIntent]:
    return [EffectIntent.objects.get(run=succeeded_run(tenant, effects=EMAIL, name=f"r{i}")) for i in range(n)]


def test_claim__undated_first_then_dated_by_due_time__held_and_future_passed_over(tenant):
    undated, backoff_over, held, future = intents(tenant, 4)
    now = authority_now()
    EffectIntent.objects.filter(id=backoff_over.id).update(next_attempt_at=now - timedelta(seconds=5))
    EffectIntent.objects.filter(id=held.id).update(state=EffectState.UNCERTAIN, next_attempt_at=None)
    EffectIntent.objects.filter(id=future.id).update(next_attempt_at=now + timedelta(hours=1))

    taken = []
    while (prepared := claim_next_delivery(PassStats(), exclude=set(taken))) is not None:
        taken.append(prepared.intent_id)

    assert taken == [undated.id, backoff_over.id]
    assert set(EffectDelivery.objects.values_list("intent_id", flat=True)) == {undated.id, backoff_over.id}


def test_effects_pass__intents_settled_without_a_request__count_against_its_limit(tenant):
    pending = intents(tenant, 3)
    EffectIntent.objects.update(target={})  # no recipients: each settles as skipped, nothing is sent

    first = effects_pass(limit=2)

    assert (first.deliveries, first.settled) == (0, 2)
    assert EffectIntent.objects.filter(state=EffectState.SKIPPED).count() == 2
    assert effects_pass(limit=2).settled == 1
    assert {i.state for i in EffectIntent.objects.filter(id__in=[i.id for i in pending])} == {EffectState.SKIPPED}


def test_settlement__a_write_that_finds_the_intent_changed_since_its_lock_fails_loudly(tenant):
    """Every change of an intent is guarded by what it was when locked: one that finds another
    outcome recorded meanwhile (a lock not taken) raises instead of overwriting it."""
    from effects.delivery import _locked, _write
    from runs.authority.statements.rows import TransitionConflict

    [intent] = intents(tenant, 1)
    locked = _locked(intent)
    EffectIntent.objects.filter(id=intent.id).update(state=EffectState.SENT)  # another process settled it
    intent.state = EffectState.FAILED

    with pytest.raises(TransitionConflict):
        _write(intent, locked)
    assert EffectIntent.objects.get(id=intent.id).state == EffectState.SENT
