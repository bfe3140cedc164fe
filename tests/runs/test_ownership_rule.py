"""The ownership rule (runs.authority.owner) on every path that acts for an attempt: each
refuses a fence that is not the run's, a lease that has passed and an attempt that is no
longer the run's current one, and accepts the owner. One table: a path that forgot a part
of the rule fails its row."""

import pytest

from runs import authority
from runs.authority import Success
from runs.models import Run
from scheduler_project.errors import StaleFence
from tests.authority_steps import create_schedule, expire_lease, stage, start_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


def heartbeat(run, attempt_id, fence, staged):
    authority.heartbeat(run_id=run.id, attempt_id=attempt_id, fence=fence)
    return True


def heartbeat_many(run, attempt_id, fence, staged):
    return attempt_id in authority.heartbeat_many([(attempt_id, fence)])


def upload(run, attempt_id, fence, staged):
    stage(run, b"a,b\n", attempt_id=attempt_id, fence=fence)  # the owner's repeat is answered again
    return True


def progress(run, attempt_id, fence, staged):
    return authority.record_progress(run_id=run.id, attempt_id=attempt_id, fence=fence, fraction=0.5)


def complete(run, attempt_id, fence, staged):
    authority.complete(run_id=run.id, attempt_id=attempt_id, fence=fence, outcome="succeeded", object_key=staged.key,
                       version_id=staged.version_id, checksum=staged.checksum)
    return True


def complete_as_a_group(run, attempt_id, fence, staged):
    [answer] = authority.complete_succeeded([Success(run.id, attempt_id, fence, staged)])
    if isinstance(answer, Exception):
        raise answer
    return True


PATHS = [heartbeat, heartbeat_many, upload, progress, complete, complete_as_a_group]


def owner(run):
    return run.current_attempt_id, run.fence


def another_fence(run):
    return run.current_attempt_id, run.fence + 1


def passed_lease(run):
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


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("case, owns", [(owner, True), (another_fence, False), (passed_lease, False),
                                        (replaced_attempt, False)], ids=lambda c: getattr(c, "__name__", ""))
def test_every_path__accepts_the_owner_and_refuses_any_other(tenant, path, case, owns):
    run = start_run(create_schedule(tenant))
    staged = stage(run, b"a,b\n")  # while it owns the run: completion publishes it
    attempt_id, fence = case(run)
    run = Run.objects.get(id=run.id)

    try:
        accepted = path(run, attempt_id, fence, staged)
    except StaleFence:
        accepted = False

    assert accepted is owns
