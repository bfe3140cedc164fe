"""The authority's boundaries: entry points are durable transactions, and every transition is
a guarded statement that refuses a row in an unexpected state."""

import pytest
from django.db import transaction

from runs import authority
from runs.authority.statements.rows import TransitionConflict, transition
from runs.models import Run, RunState
from tests.authority_steps import create_schedule, materialize_one


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", [
    lambda: authority.materialize_due(),
    lambda: authority.claim(worker_label="w"),
    lambda: authority.sweep_expired_leases(),
    lambda: authority.promote_due_runs(),
    lambda: authority.heartbeat(run_id="run_x", attempt_id="att_x", fence=1),
    lambda: authority.complete(run_id="run_x", attempt_id="att_x", fence=1, outcome="failed"),
])
def test_entry_point__inside_a_callers_transaction__refused(call):
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        call()


@pytest.mark.django_db
def test_transition__row_in_another_state__conflict_and_nothing_written(tenant):
    run = materialize_one(create_schedule(tenant))
    assert run.state == RunState.QUEUED
    with pytest.raises(TransitionConflict):
        transition(run, {"state": RunState.RUNNING}, state=RunState.SUCCEEDED)
    assert Run.objects.get(id=run.id).state == RunState.QUEUED and run.state == RunState.QUEUED


@pytest.mark.django_db
def test_transition__expected_state__writes_only_named_columns(tenant):
    run = materialize_one(create_schedule(tenant))
    Run.objects.filter(id=run.id).update(error="written by someone else")
    transition(run, {"state": RunState.QUEUED}, max_attempts=7)
    stored = Run.objects.get(id=run.id)
    assert stored.max_attempts == 7 == run.max_attempts
    assert stored.error == "written by someone else"  # a whole-row save would have reverted it
