"""The relay marking hints published and claims marking the same intents processed, from
several PostgreSQL sessions at once: both lock the outbox rows they write in id order, so
they wait for each other and never deadlock, and every intent ends published and processed.

The claim serves runs in claim order (oldest due first) and the relay its batch in id
order; the intents here are written so the two orders are opposite, the case where two
statements locking row by row in their own orders deadlocked."""

import random
import time

import pytest
from django.db import connection

from runs import authority
from runs.models import Outbox, Run, RunState
from runs.relay import relay_pass
from tests.authority_steps import create_schedule, insert_runs
from tests.concurrency.harness import race
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS, RUNS, CLAIM = 100, 96, 32


def queue_in_reverse(extra: str) -> None:
    """A new tenant's ``RUNS`` queued runs (a tenant per round: the claim's recount of its
    running runs stays small), the i-th due i seconds before the last, with their dispatch
    intents written newest due first: the claim's order is the reverse of the ids'."""
    tenant = make_tenant(f"outbox-order-{extra}", max_active_runs=10**6)
    schedule = create_schedule(tenant, overlapPolicy="allow")
    insert_runs(RUNS, tenant_id=tenant.id, schedule_ids=[schedule.id], state="queued",
                due="now() - interval '1 hour'", extra=extra, step=-1)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_outbox (kind, action_key, run_id, resource_class, created_at, publish_attempts,"
            " last_error, broker_epoch) SELECT 'dispatch', 'dispatch:' || r.id || ':1', r.id, r.resource_class,"
            " now(), 0, '', '' FROM runs_run AS r WHERE r.id LIKE %s ORDER BY r.due_at DESC",
            [f"run_{extra}%"])


def publish_slowly(hints) -> None:
    """The broker accepting the batch, after a moment that varies: the relay's write of
    published_at lands at every point of a claim's transaction over the rounds."""
    time.sleep(random.uniform(0, 0.006))


def claim():
    return len(authority.claim_many(n=CLAIM, worker_label="claimer", lease_seconds=300))


def test_relay_and_claims_on_the_same_intents__never_deadlock(sessions):
    relay, claimers = sessions("relay"), [sessions(f"claimer-{n}") for n in range(3)]
    errors = []
    for round_number in range(ROUNDS):
        queue_in_reverse(f"o{round_number}_")
        outcomes = race((relay, lambda: relay_pass(publish_slowly, batch_size=RUNS)),
                        *[(claimer, claim) for claimer in claimers])
        errors += [repr(o.error) for o in outcomes if not o.ok]
    assert not errors, f"{len(errors)} failed calls in {ROUNDS} rounds, the first: {errors[0]}"
    # What the claims left (their share ran out before the runs did) and the relay's next
    # passes, with nobody racing: every run claimed once, every intent published and processed.
    while authority.claim_many(n=CLAIM, worker_label="claimer", lease_seconds=300):
        pass
    while relay_pass(lambda hints: None, batch_size=RUNS)[0]:
        pass
    runs = Run.objects.all()
    assert runs.count() == ROUNDS * RUNS and not runs.exclude(state=RunState.RUNNING).exists()
    intents = Outbox.objects.all()
    assert intents.count() == ROUNDS * RUNS
    assert not intents.filter(processed_at__isnull=True).exists()
    assert not intents.filter(published_at__isnull=True).exists()
