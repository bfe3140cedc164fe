"""Concurrency keys under racing claimers, each its own PostgreSQL session: whatever the
number of claimers, never more attempts of a key running than its limit; the tenant's runs
without a key are all claimed meanwhile."""

import pytest

from runs import authority
from runs.models import Run, RunState
from schedule_services.concurrency_keys import key_limit_set
from tests.authority_steps import REPORT, complete_success, create_schedule, stage
from tests.concurrency.harness import race
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 2
ROUNDS = 4


def _claim_until_dry():
    got = []
    for _ in range(100):
        batch = authority.claim_many(n=3, worker_label="claimer", lease_seconds=300)
        if not batch:
            return got
        got.extend(batch)
    raise AssertionError("claimer never ran dry")


def _running_with_key(tenant) -> list[Run]:
    return list(Run.objects.filter(tenant=tenant, state=RunState.RUNNING, schedule__concurrency_key="etl"))


def test_four_claimers__a_key_never_runs_more_than_its_limit(sessions):
    tenant = make_tenant("big", max_active_runs=1000)
    keyed = [create_schedule(tenant, name=f"etl-{n}", overlapPolicy="allow", concurrencyKey="etl") for n in range(3)]
    plain = create_schedule(tenant, name="plain", overlapPolicy="allow")
    key_limit_set(tenant=tenant, key="etl", limit=LIMIT)
    waiting = [authority.run_once(tenant=tenant, schedule_id=keyed[n % 3].id)[0].id for n in range(ROUNDS * LIMIT)]
    free = [authority.run_once(tenant=tenant, schedule_id=plain.id)[0].id for _ in range(12)]

    for round_number in range(ROUNDS):
        outcomes = race(*[(sessions(f"claimer-{n}"), _claim_until_dry) for n in range(4)])
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        running = _running_with_key(tenant)
        assert len(running) == LIMIT, f"round {round_number}: {len(running)} attempts of the key running"
        if round_number == 0:
            assert Run.objects.filter(id__in=free, state=RunState.RUNNING).count() == len(free)
        for run in running:  # they end; the next round's claimers may start as many again
            complete_success(run.id, run.current_attempt_id, run.fence, stage(run, REPORT))
    assert not Run.objects.filter(id__in=waiting, state=RunState.QUEUED).exists()
