"""The ownership rule (runs.authority.owner) on every path that acts for an attempt: each
refuses a fence that is not the run's, a lease that has passed on database time, an attempt
that is no longer the run's current one and a run that is no longer running, and accepts the
owner. One table: a path that forgot a clause of the rule fails its row.

Where a path has a fast statement and a general path behind it (upload registration, the
group commit), the statement is also a path of its own, with no general path to catch what
it let through. On PostgreSQL, and on the embedded SQLite when
tests/runs/test_embedded_authority.py runs this module there."""

from types import SimpleNamespace

import pytest

from kernel.clock import authority_now
from kernel.errors import StaleFence
from runs import authority
from runs.authority import Success
from runs.authority.group_commit import _commit_group
from runs.authority.objects import attempt_can_publish
from runs.authority.staging import result_key
from runs.authority.statements.objects import objects_register_if_owned
from runs.models import Attempt, Run, RunState
from tests.authority_steps import create_schedule, expire_lease, stage, start_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


# Each path acts for (attempt id, fence) and answers whether it was accepted (StaleFence: not).

def heartbeat(run, attempt_id, fence, staged):
    authority.heartbeat(run_id=run.id, attempt_id=attempt_id, fence=fence)
    return True


def heartbeat_many(run, attempt_id, fence, staged):
    """PostgreSQL: statements.attempts.attempts_extend_leases_if_owned; SQLite: one lease at a time, in Python."""
    return attempt_id in authority.heartbeat_many([(attempt_id, fence)])


def upload(run, attempt_id, fence, staged):
    """The first upload of the attempt's key: registration, else the general path."""
    stage(run, b"a,b\n", attempt_id=attempt_id, fence=fence)
    return True


def upload_registration(run, attempt_id, fence, staged):
    """The registration statement alone (owns_sql over the run and the attempt)."""
    key = result_key(run.id, attempt_id)
    item = SimpleNamespace(key=key, run_id=run.id, attempt_id=attempt_id, fence=fence, content_type="text/csv",
                           worker_token_id=None)
    return key in objects_register_if_owned([item])


def progress(run, attempt_id, fence, staged):
    return authority.record_progress(run_id=run.id, attempt_id=attempt_id, fence=fence, fraction=0.5)


def still_owns(run, attempt_id, fence, staged):
    return authority.still_owns(run_id=run.id, attempt_id=attempt_id, fence=fence)


def complete(run, attempt_id, fence, staged):
    authority.complete(run_id=run.id, attempt_id=attempt_id, fence=fence, outcome="succeeded", object_key=staged.key,
                       version_id=staged.version_id, checksum=staged.checksum)
    return True


def complete_as_a_group(run, attempt_id, fence, staged):
    [answer] = authority.complete_succeeded([Success(run.id, attempt_id, fence, staged)])
    if isinstance(answer, Exception):
        raise answer
    return True


def group_commit_statements(run, attempt_id, fence, staged):
    """The group's own publication alone, without the single completion it leaves the rest to."""
    return _commit_group([Success(run.id, attempt_id, fence, staged)]) != {}


def cleanup_recheck(run, attempt_id, fence, staged):
    """Cleanup's question of a staged object: could its attempt still publish it?"""
    return attempt_can_publish(run, Attempt.objects.filter(id=attempt_id).first(), fence, authority_now())


PATHS = [heartbeat, heartbeat_many, upload, upload_registration, progress, still_owns, complete,
         complete_as_a_group, group_commit_statements, cleanup_recheck]
PUBLISHING = {complete, complete_as_a_group, group_commit_statements, cleanup_recheck}  # need a staged result


# Each case changes the run as time and other actors would, then names who acts.

def owner(run):
    return run.current_attempt_id, run.fence


def another_fence(run):
    return run.current_attempt_id, run.fence + 1


def passed_lease(run):
    """The lease moved one second into the past of database time: nothing else changed."""
    expire_lease(run.id)
    return run.current_attempt_id, run.fence


def replaced_attempt(run):
    """The lease passed, the sweeper re-queued the run, another worker claimed it."""
    first = run.current_attempt_id, run.fence
    expire_lease(run.id)
    assert authority.sweep_expired_leases() == 1
    again = authority.claim(worker_label="second-worker", lease_seconds=60)
    assert again.id == run.id and again.current_attempt_id != first[0]
    return first


def no_longer_running(run):
    """Only the run's state changed (canceled, by an UPDATE): its attempt is still running,
    current, with the caller's fence and a live lease, so the run's state alone refuses."""
    Run.objects.filter(id=run.id).update(state=RunState.CANCELED, finished_at=authority_now(), holds_guard=False)
    assert Attempt.objects.get(id=run.current_attempt_id).state == "running"
    return run.current_attempt_id, run.fence


def requeued(run):
    """The lease passed and the sweeper re-queued the run; no worker claimed it yet."""
    expire_lease(run.id)
    assert authority.sweep_expired_leases() == 1
    assert Run.objects.get(id=run.id).state != RunState.RUNNING
    return run.current_attempt_id, run.fence


CASES = [(owner, True), (another_fence, False), (passed_lease, False), (replaced_attempt, False),
         (no_longer_running, False), (requeued, False)]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("case, owns", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_every_path__accepts_the_owner_and_refuses_any_other(tenant, path, case, owns):
    run = start_run(create_schedule(tenant, overlapPolicy="allow"))  # no guard: the group commit's own case
    staged = stage(run, b"a,b\n") if path in PUBLISHING else None  # while it owns the run
    attempt_id, fence = case(run)
    run = Run.objects.get(id=run.id)

    try:
        accepted = path(run, attempt_id, fence, staged)
    except StaleFence:
        accepted = False

    assert accepted is owns
