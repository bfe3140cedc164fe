"""Concurrent edits: edits carry an expected revision; a materialized occurrence keeps its
revision's payload through every retry, whatever edits come later."""

import pytest

from kernel.errors import RevisionConflict
from runs import authority
from runs.models import AttemptState, Run, RunState
from schedule_services.lifecycle import schedule_update
from schedules.models import Schedule, ScheduleRevision
from schedules.specs import ScheduleSpec
from tests.authority_steps import create_schedule, expire_lease, materialize_one
from tests.concurrency.harness import race

pytestmark = pytest.mark.django_db(transaction=True)

RETRY_AT_ONCE = {"maxAttempts": 3, "initialDelaySeconds": 0, "maxDelaySeconds": 0}


def test_concurrent_edits__same_expected_revision__one_wins_other_conflicts_with_current(tenant, sessions):
    admin, client = sessions("admin"), sessions("client")
    schedule = create_schedule(tenant, params={"seconds": 0}, overlapPolicy="allow")
    for n in range(1, 11):
        materialized = materialize_one(schedule)
        assert materialized.revision == n

        def edit(seconds):
            return lambda: schedule_update(tenant=tenant, schedule_id=schedule.id, expected_revision=n,
                                           changes=ScheduleSpec(params={"seconds": seconds}))

        outcomes = race((admin, edit(100 + n)), (client, edit(200 + n)))

        winners = [o for o in outcomes if o.ok]
        losers = [o for o in outcomes if not o.ok]
        assert len(winners) == 1 and len(losers) == 1, [o.error for o in outcomes]
        won = winners[0].value
        assert won.revision == n + 1
        assert isinstance(losers[0].error, RevisionConflict), repr(losers[0].error)
        current = losers[0].error.current
        assert current.revision == n + 1 and current.params == won.params
        stored = Schedule.objects.get(id=schedule.id)
        assert stored.revision == n + 1 and stored.params == won.params
        assert ScheduleRevision.objects.get(schedule=schedule, revision=n + 1).payload["params"] == won.params
        assert ScheduleRevision.objects.filter(schedule=schedule).count() == n + 1
        # The occurrence materialized under revision n keeps revision n's payload.
        materialized.refresh_from_db()
        assert materialized.revision == n
        assert materialized.payload["params"] == (
            {"seconds": 0} if n == 1 else ScheduleRevision.objects.get(schedule=schedule, revision=n).payload["params"])

    following = materialize_one(schedule)
    assert following.revision == 11 and following.payload["params"] == Schedule.objects.get(id=schedule.id).params


def test_retry_backoff__edit_between_attempts__retries_keep_original_revision_and_params(tenant, sessions):
    worker, editor = sessions("worker"), sessions("editor")
    schedule = create_schedule(tenant, params={"seconds": 1, "fail": "transient"}, retry=RETRY_AT_ONCE)
    run = materialize_one(schedule)
    original = dict(run.payload)

    first = worker.call(authority.claim, worker_label="w")
    assert first.id == run.id and first.revision == 1
    editor.call(schedule_update, tenant=tenant, schedule_id=schedule.id, expected_revision=1,
                changes=ScheduleSpec(params={"seconds": 9, "fail": "never"}, retry={"maxAttempts": 10}))
    worker.call(authority.complete, run_id=run.id, attempt_id=first.current_attempt_id, fence=first.fence,
                outcome="failed", error="transient", retryable=True)
    assert Run.objects.get(id=run.id).state == RunState.PENDING
    assert authority.promote_due_runs() == 1

    second = worker.call(authority.claim, worker_label="w")
    assert (second.id, second.fence, second.revision) == (run.id, 2, 1)
    assert second.payload == original and second.payload["params"] == {"seconds": 1, "fail": "transient"}

    # A lease expiry is another way to get a retry: same story.
    editor.call(schedule_update, tenant=tenant, schedule_id=schedule.id, expected_revision=2,
                changes=ScheduleSpec(params={"seconds": 3}))
    expire_lease(run.id)
    assert authority.sweep_expired_leases() == 1
    third = worker.call(authority.claim, worker_label="w")
    assert (third.id, third.fence, third.revision) == (run.id, 3, 1)
    assert third.payload == original

    # The original retry policy (3 attempts) still bounds it, not the edited one (10).
    final = worker.call(authority.complete, run_id=run.id, attempt_id=third.current_attempt_id,
                        fence=third.fence, outcome="failed", error="transient", retryable=True)
    assert final.state == RunState.FAILED and final.attempt_count == 3
    assert list(run.attempts.order_by("number").values_list("state", flat=True)) == [
        AttemptState.FAILED, AttemptState.EXPIRED, AttemptState.FAILED]
    assert Run.objects.get(id=run.id).revision == 1
