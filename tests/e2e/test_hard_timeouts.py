"""Hard timeouts with real processes: a job that never checks in (blocked in C on a silent
socket, a pure-Python busy loop, one that swallows the interruption) is stopped at its job
type's timeout, in a real Celery prefork worker fed by the relay through Redis (the job on
the pool process's main thread), the same worker claiming through its idle claims (the job on
a thread: a blocked read is stopped by ending the process), a Celery solo worker (ended at
the hard limit, started again by its supervisor), and in the embedded dispatcher's job
processes. Each attempt is recorded failed with reason timeout by the worker itself (no
sweeper runs here; the test queues the due retry, as a scanner does), the retry runs and
times out too, and the one slot is free again: a quick job queued behind the stuck one
succeeds. A pool that could not end a stuck job's process refuses to start.

The bounds are on what holds under any load. Which limit stopped the job is read from its
process ids (the soft interruption leaves the process alive, the hard limit ends it), not
from wall time; no attempt ends before its timeout (or, ended hard, before the grace after
it); and each ends before the authority's bound, its deadline plus the lease grace, in
database time: a worker recording it any later would be refused, and no sweeper runs here."""

import io
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command

from runs import authority
from runs.models import Attempt, Run, RunState
from schedules.models import JobType
from tests.authority_steps import create_schedule
from tests.child_env import database_url_of_test_db
from tests.e2e.processes import PYTHON, wait_until
from workers.jobs import framework

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODULE = "tests.stuck_jobs"
HARD_GRACE = settings.JOB_HARD_TIMEOUT_GRACE_SECONDS  # the hard limit, after the timeout
# Where only the hard limit can end the job (it swallows the interruption, or no signal reaches
# it), nothing happens between the timeout and the hard limit: the workers get a grace of 1 s.
ENDED_HARD_GRACE = 1.0
LEASE_GRACE = timedelta(seconds=settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS)  # the authority's bound, after the deadline
SOFT, HARD = "soft", "hard"


def ended_hard(params: dict) -> bool:
    """Whether the test's job can only be ended by the hard limit (not interrupted)."""
    return params.get("job") == "SWALLOWS" or (params.get("job"), params.get("one_slot")) == (
        "STUCK_IN_C", "celery-idle-claims")


@pytest.fixture
def stuck(monkeypatch, processes, tmp_path, tenant, request):
    monkeypatch.setattr(framework, "JOBS", dict(framework.JOBS))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    module = __import__(MODULE, fromlist=["_"])
    call_command("sync_job_types", stdout=io.StringIO())
    tenant.allowed_job_types.add(*JobType.objects.filter(name__startswith="timeouts."))
    gate = tmp_path / "gate"
    gate.mkdir()
    processes.env.pop("REDIS_URL", None)
    processes.env.update({
        "DATABASE_URL": database_url_of_test_db(), "OBJECT_STORE_URL": f"file://{tmp_path}/objects",
        "SCHEDULER_JOB_MODULES": MODULE, "JOB_GATE": str(gate), "SECRET_KEY": "hard-timeouts-test-key",
        "IDLE_CLAIM_SECONDS": "0",  # every run through a hint, executed on the pool process's main thread
    })
    callspec = getattr(request.node, "callspec", None)
    module.hard_grace = ENDED_HARD_GRACE if callspec and ended_hard(callspec.params) else HARD_GRACE
    processes.env["JOB_HARD_TIMEOUT_GRACE_SECONDS"] = str(module.hard_grace)
    module.gate = gate
    return module


SOLO = [PYTHON, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short", "-P", "solo", "-n", "solo@%h",
        "--without-gossip", "--without-mingle", "-l", "info"]


class Supervisor:
    """What runs a solo worker in production (compose's restart policy, systemd): a worker
    that ended is started again, here whenever the test looks (``check``)."""

    def __init__(self, processes):
        self.processes = processes
        self.started = 0
        self.start()

    def start(self):
        self.processes.start("worker", SOLO)
        self.started += 1

    def check(self):
        if self.processes.children["worker"].poll() is not None:
            self.start()


@pytest.fixture(params=["celery", "celery-idle-claims", "celery-solo", "embedded"])
def one_slot(request, processes, stuck, redis_url):
    """A worker with one slot of class short: a Celery worker of concurrency 1 and the relay
    (jobs on the pool process's main thread), the same worker with no relay (its idle claims
    run the jobs on a thread of the pool process), a Celery solo worker and the relay (jobs on
    the worker's own main thread; ended hard, its supervisor starts it again), or the embedded
    dispatcher with one job process."""
    if request.param == "celery-solo":
        processes.env["REDIS_URL"] = redis_url
        processes.manage("relay", "relay")
        request.node.supervisor = Supervisor(processes)
        wait_until(lambda: "ready" in processes.log("worker"), timeout=60, message="the worker to start")
    elif request.param == "celery-idle-claims":
        processes.env.update(REDIS_URL=redis_url, IDLE_CLAIM_SECONDS="0.3")
        processes.celery_worker("worker", "short", concurrency=1)
        wait_until(lambda: "ready" in processes.log("worker"), timeout=60, message="the worker to start")
    elif request.param == "celery":
        processes.env["REDIS_URL"] = redis_url
        processes.manage("relay", "relay")
        processes.celery_worker("worker", "short", concurrency=1)
        wait_until(lambda: "ready" in processes.log("worker"), timeout=60, message="the worker to start")
    else:
        processes.manage("worker", "dispatch", "--pools", "short=1", "--poll-interval", "0.05")
        wait_until(lambda: "dispatch: pools" in processes.log("worker"), timeout=60, message="the dispatcher")
    return request.param


def run_of(tenant, job_type: str) -> Run:
    schedule = create_schedule(tenant, name=job_type, job_type=job_type, params={})
    return authority.run_once(tenant=tenant, schedule_id=schedule.id)[0]


def attempts(run: Run) -> list[Attempt]:
    return list(Attempt.objects.filter(run=run).order_by("number"))


@pytest.mark.parametrize("job, limit", [("STUCK_IN_C", SOFT), ("BUSY_LOOP", SOFT), ("SWALLOWS", HARD)])
def test_a_job_that_never_checks_in_is_stopped_at_its_timeout(one_slot, stuck, tenant, processes, job, limit,
                                                             request):
    supervisor = getattr(request.node, "supervisor", None)
    if one_slot == "celery-idle-claims" and job == "STUCK_IN_C":
        limit = HARD  # off the main thread no signal interrupts a blocked read: its process is ended
    stuck_run = run_of(tenant, getattr(stuck, job))
    wait_until(lambda: (stuck.gate / f"{stuck_run.id}-1").exists(), timeout=30, message="attempt 1 to start")
    quick_run = run_of(tenant, stuck.QUICK)  # waits for the one slot

    def finished():
        if supervisor is not None:
            supervisor.check()
        authority.promote_due_runs()  # the scanner's part: the retry, due after its delay, is queued
        return Run.objects.filter(id__in=[stuck_run.id, quick_run.id], finished_at__isnull=False).count() == 2

    wait_until(finished, timeout=2 * (stuck.TIMEOUT + LEASE_GRACE.total_seconds()) + 10, interval=0.1,
               message=f"both runs to finish ({processes.log('worker')[-3000:]})")

    stuck_run.refresh_from_db()
    assert (stuck_run.state, stuck_run.attempt_count) == (RunState.FAILED, 2), stuck_run.error
    for attempt in attempts(stuck_run):  # the first failed and was retried, the retry failed too
        assert (attempt.state, attempt.reason, attempt.retryable) == ("failed", "timeout", True), attempt.error
        assert attempt.error == f"timed out after {stuck.TIMEOUT}s"  # recorded by the worker, not a sweeper
        assert attempt.deadline_at - attempt.started_at == timedelta(seconds=stuck.TIMEOUT)
        took = (attempt.finished_at - attempt.started_at).total_seconds()
        # Never before its timeout (ended hard: its grace after it); never past the authority's bound.
        assert took >= stuck.TIMEOUT + (stuck.hard_grace if limit == HARD else 0), took
        assert attempt.finished_at <= attempt.deadline_at + LEASE_GRACE, took
        # The lease was released with the failure, not left to run out.
        assert attempt.lease_expires_at <= attempt.deadline_at + LEASE_GRACE
    quick_run.refresh_from_db()
    assert quick_run.state == RunState.SUCCEEDED, quick_run.error
    pids = {(stuck.gate / f"{stuck_run.id}-{n}").read_text() for n in (1, 2)}
    # Interrupted, the job's process lives on and takes the retry; ended, its slot started another.
    assert len(pids) == (2 if limit == HARD else 1), pids
    if supervisor is not None:  # the solo worker ended at a hard timeout, and only then
        assert supervisor.started >= 2 if limit == HARD else supervisor.started == 1


@pytest.mark.parametrize("argv", [
    pytest.param([PYTHON, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short", "-P", "threads",
                  "--without-gossip", "--without-mingle"], id="celery-threads"),
    pytest.param([PYTHON, "manage.py", "dispatch", "--threads"], id="dispatch-threads"),
])
def test_a_pool_where_a_stuck_job_could_not_be_ended__refuses_to_start(stuck, processes, argv):
    """Jobs on threads of one process: a job stuck past its timeout could be neither
    interrupted out of a blocking call nor ended without ending every other job."""
    processes.start("refused", argv)
    assert processes.children["refused"].wait(timeout=60) != 0
    said = processes.log("refused")
    assert ("refusing to start" in said and "prefork" in said) or ("--threads is gone" in said and "job process" in said), said
