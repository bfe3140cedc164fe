"""Replay races, each side its own PostgreSQL session: two replays of one failed run, and a
replay waiting for a run that retention removes meanwhile."""

import time

import pytest

from runs import authority
from runs.models import Outbox, Run, RunState
from kernel.errors import InvalidState, NotFound
from tests.authority_steps import create_schedule, start_run
from tests.concurrency.harness import race

pytestmark = pytest.mark.django_db(transaction=True)


def failed_run(tenant) -> Run:
    run = start_run(create_schedule(tenant))
    return authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                              error="upstream down", retryable=False)


def test_two_replays_of_one_failed_run__one_wins_the_other_is_invalid_state(tenant, sessions):
    run = failed_run(tenant)
    dispatches = Outbox.objects.filter(run=run).count()

    def replay(note):
        return lambda: authority.run_replay(tenant=tenant, run_id=run.id, note=note)

    outcomes = race((sessions("client-a"), replay("a")), (sessions("client-b"), replay("b")))

    assert sorted(o.ok for o in outcomes) == [False, True]
    [refused] = [o.error for o in outcomes if not o.ok]
    assert isinstance(refused, InvalidState)
    stored = Run.objects.get(id=run.id)
    assert stored.state == RunState.QUEUED and len(stored.replays) == 1
    assert Outbox.objects.filter(run=run).count() == dispatches + 1


def test_replay_waiting_for_a_run_removed_meanwhile__is_not_found(tenant, sessions):
    run = failed_run(tenant)
    retention, client = sessions("retention"), sessions("client")

    def remove():
        Run.objects.select_for_update().filter(id=run.id).get()
        Run.objects.filter(id=run.id).delete()

    with retention.holding(remove):
        waiting = client.submit(lambda: authority.run_replay(tenant=tenant, run_id=run.id))
        time.sleep(0.3)  # the replay has the schedule and waits for the run's lock
        assert not waiting.done()
    with pytest.raises(NotFound):
        waiting.result(30)
