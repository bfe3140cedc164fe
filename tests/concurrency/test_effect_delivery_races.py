"""Two effect deliverers, each on its own PostgreSQL connection, finishing deliveries of one
intent: the one whose claim was taken over after its deadline (stale) has its answer recorded
on its own delivery row, and its write to the intent is refused; the winner's outcome stays."""

from datetime import timedelta

import pytest
from django.db import connection

from effects import adapters
from effects.adapters import ProviderOutcome
from effects.delivery import PassStats, claim_next_delivery, finish_delivery
from kernel.clock import authority_now
from runs.authority.statements.rows import TransitionConflict
from runs.models import EffectDelivery, EffectIntent, EffectState
from tests.authority_steps import succeeded_run
from tests.concurrency.harness import race
from tests.factories import make_tenant

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="races need PostgreSQL sessions")


def make_due(intent_id: str) -> None:
    EffectIntent.objects.filter(id=intent_id).update(next_attempt_at=authority_now() - timedelta(seconds=1))


def taken_over(a, b):
    """Deliverer a claims delivery 1 and stalls past its deadline; deliverer b records it
    abandoned and claims delivery 2 (demo.sleep: the `retry` uncertain policy)."""
    succeeded_run(make_tenant("acme"), job_type="demo.sleep", effects={"email": {"to": ["ops@example.com"]}})
    stale = a.call(claim_next_delivery, PassStats())
    assert stale is not None and stale.number == 1
    make_due(stale.intent_id)
    stats = PassStats()
    assert b.call(claim_next_delivery, stats) is None and stats.recovered == 1
    make_due(stale.intent_id)
    winner = b.call(claim_next_delivery, PassStats())
    assert winner is not None and (winner.intent_id, winner.number) == (stale.intent_id, 2)
    return stale, winner


def test_stale_deliverer_racing_the_winner__its_failure_is_refused_and_the_winners_sent_stays(sessions):
    a, b = sessions("deliverer-a"), sessions("deliverer-b")
    stale, winner = taken_over(a, b)

    outcomes = race(
        (a, lambda: finish_delivery(stale, ProviderOutcome(adapters.FAILED, detail="550 rejected"))),
        (b, lambda: finish_delivery(winner, ProviderOutcome(adapters.SENT, external_id="<winner>"))),
    )

    assert [o.value for o in outcomes] == [False, True], [o.error for o in outcomes]
    intent = EffectIntent.objects.get(id=stale.intent_id)
    assert (intent.state, intent.external_id, intent.delivery_count) == (EffectState.SENT, "<winner>", 2)
    deliveries = EffectDelivery.objects.filter(intent_id=intent.id).order_by("number")
    # The stale answer is evidence about its own request: kept on its row, nowhere else.
    assert [(d.number, d.outcome, d.detail) for d in deliveries] == [
        (1, EffectState.FAILED, "550 rejected"), (2, EffectState.SENT, "")]


def test_stale_deliverer_finishing_while_the_winner_is_in_flight__leaves_the_intent_to_the_winner(sessions):
    a, b = sessions("deliverer-a"), sessions("deliverer-b")
    stale, winner = taken_over(a, b)
    before = EffectIntent.objects.values_list("state", "delivery_count", "next_attempt_at").get(id=stale.intent_id)

    assert a.call(finish_delivery, stale, ProviderOutcome(adapters.NOT_DELIVERED, detail="connection refused")) is False
    assert EffectIntent.objects.values_list("state", "delivery_count", "next_attempt_at").get(
        id=stale.intent_id) == before  # delivery 2's deadline stands: no backoff from the stale answer

    assert b.call(finish_delivery, winner, ProviderOutcome(adapters.SENT, external_id="<winner>")) is True
    assert EffectIntent.objects.get(id=stale.intent_id).state == EffectState.SENT
    # Finishing the same delivery twice is a bug, not a race: it fails loudly.
    with pytest.raises(TransitionConflict):
        b.call(finish_delivery, winner, ProviderOutcome(adapters.FAILED, detail="again"))
