"""The invariant checker itself: quiet on a clean history, loud on each kind of damage.

No processes here: the history is made in-process through the authority, then damaged
behind its back the way a bug would.
"""

from datetime import timedelta

import pytest

from kernel.clock import authority_now
from objectstore import get_object_store
from runs import authority
from runs.models import Attempt, Run, RunState, StoredObject
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from tests.chaos.invariants import check_invariants
from tests.factories import make_tenant
from workers import uploads

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]

EVERY = 60


@pytest.fixture
def history():
    """One interval schedule three instants overdue, every occurrence run to success."""
    tenant = make_tenant("inv")
    start = authority_now().replace(microsecond=0) - timedelta(seconds=EVERY * 2)
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "params": {"seconds": 0}, "misfirePolicy": "run_all",
        "overlapPolicy": "allow",
        "recurrence": {"kind": "interval", "everySeconds": EVERY, "anchor": start.isoformat()},
    }))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=start)
    authority.materialize_due()
    while (run := authority.claim(worker_label="t")) is not None:
        succeed(run)
    return schedule, (start, start + timedelta(seconds=EVERY * 2))


def succeed(run):
    obj = uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                               data=run.id.encode(), content_type="text/plain")
    return authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                              outcome="succeeded", object_key=obj.key, version_id=obj.version_id,
                              checksum=obj.checksum)


def check(schedule, window):
    return check_invariants(schedule_ids=[schedule.id], recurring_ids=[schedule.id], window=window)


def test_invariants__clean_history_has_no_problems(history):
    report = check(*history)
    report.assert_ok()
    assert (report.runs, report.instants, report.by_state) == (3, 3, {RunState.SUCCEEDED: 3})


def test_invariants__a_due_instant_without_occurrence_is_lost(history):
    schedule, window = history
    # The last instant's occurrence moved one second: that instant is lost, the moved one invented.
    Run.objects.filter(schedule=schedule, scheduled_at=window[1]).update(
        scheduled_at=window[1] + timedelta(seconds=1))
    report = check(schedule, window)
    assert len(report.lost) == 1 and len(report.invented) == 1


def test_invariants__an_unfinished_run_is_reported(history):
    schedule, window = history
    Run.objects.filter(schedule=schedule, scheduled_at=window[0]).update(state=RunState.QUEUED)
    assert len(check(schedule, window).not_terminal) == 1


def test_invariants__a_missing_canonical_object_is_reported(history):
    schedule, window = history
    run = Run.objects.filter(schedule=schedule).first()
    get_object_store().delete(run.result_key, run.result_version_id)
    problems = check(schedule, window).result_problems
    assert len(problems) == 1 and "missing" in problems[0]


def test_invariants__a_result_accepted_from_a_superseded_fence_is_reported(history):
    schedule, window = history
    run = Run.objects.filter(schedule=schedule).first()
    # A later attempt was granted while the accepted one was still live.
    accepted = run.accepted_attempt
    Attempt.objects.create(run=run, number=2, fence=2, state="expired", lease_seconds=3,
                           started_at=accepted.started_at, lease_expires_at=accepted.lease_expires_at,
                           finished_at=accepted.finished_at)
    Run.objects.filter(id=run.id).update(fence=2, attempt_count=2)
    report = check(schedule, window)
    assert report.fence_problems


def test_invariants__a_second_referenced_object_is_reported(history):
    schedule, window = history
    run = Run.objects.filter(schedule=schedule).first()
    StoredObject.objects.filter(run=run).update(state="staged")
    assert check(schedule, window).result_problems
