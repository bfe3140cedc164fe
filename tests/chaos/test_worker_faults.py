"""Workers die, stall or lose replies while a burst is in flight; leases, fences and the
completion protocol still carry every run to exactly one canonical result."""

import signal

import pytest

from runs.models import Attempt, AttemptState, ObjectState, Run, RunState, StoredObject
from tests.chaos.system import LEASE_SECONDS, MAX_ATTEMPTS
from tests.e2e.processes import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BURST = 240
REFUSED = r"outcome=(?:stale|lost) "  # the runtime's line for an attempt the authority disowned


def test_chaos__worker_sigkilled_mid_jobs__its_runs_are_recovered(chaos):
    load = chaos.burst(BURST)
    chaos.start(workers=2, concurrency=4)
    victim = chaos.worker_label("worker-1")
    chaos.wait_terminal(load, BURST // 5)
    chaos.wait_running(victim, count=2)

    chaos.kill("worker-1")
    in_flight = list(Attempt.objects.filter(worker_label=victim, state=AttemptState.RUNNING))
    chaos.worker("worker-3")  # its supervisor's replacement
    chaos.settle(load)

    report = chaos.check(load)
    assert report.by_state == {RunState.SUCCEEDED: BURST}
    for attempt in Attempt.objects.filter(id__in=[a.id for a in in_flight]):
        assert attempt.state == AttemptState.EXPIRED, attempt
        run = Run.objects.get(id=attempt.run_id)
        assert run.state == RunState.SUCCEEDED and run.accepted_attempt.number > attempt.number
    chaos.figures("worker SIGKILL mid-job", report, faults=1, killed_attempts=len(in_flight))


def test_chaos__worker_stopped_past_its_lease__its_late_completions_are_rejected_as_stale(chaos):
    load = chaos.burst(BURST, seconds=(0.4, 1.0))
    chaos.start(workers=2, concurrency=4)
    paused = chaos.worker_label("worker-1")
    chaos.wait_terminal(load, BURST // 5)
    chaos.wait_running(paused, count=3)

    # A pause between calls (a stalled worker runtime: GC, SIGSTOP); a pause inside a
    # transaction is the next test.
    chaos.stop_outside_transaction("worker-1")
    stopped = list(Attempt.objects.filter(worker_label=paused, state=AttemptState.RUNNING))
    stopped_ids = {a.id for a in stopped}
    chaos.worker("worker-3")
    wait_until(
        lambda: Run.objects.filter(id__in=[a.run_id for a in stopped], state=RunState.SUCCEEDED).count()
        == len(stopped),
        timeout=60, message="replacements to finish the stopped worker's runs",
    )
    assert Attempt.objects.filter(id__in=stopped_ids, state=AttemptState.EXPIRED).count() == len(stopped)

    chaos.processes.signal("worker-1", signal.SIGCONT)
    # Each resumed attempt asks the authority once more (heartbeat, stage or complete) and is refused.
    wait_until(lambda: chaos.count_in_logs(REFUSED, prefix="worker-1") >= len(stopped), timeout=30,
               message="the resumed worker to hear that its attempts are stale")
    chaos.settle(load)

    report = chaos.check(load)
    assert report.by_state == {RunState.SUCCEEDED: BURST}
    assert not Run.objects.filter(accepted_attempt_id__in=stopped_ids).exists()
    assert not StoredObject.objects.filter(attempt_id__in=stopped_ids, state=ObjectState.REFERENCED).exists()
    assert sum(chaos.stale_rejections().values()) >= len(stopped)
    chaos.figures(
        "worker SIGSTOP past lease", report, faults=1, stopped_attempts=len(stopped),
        refused_on_resume=chaos.count_in_logs(REFUSED, prefix="worker-1"),
        stale_completions=chaos.count_in_logs(r"outcome=stale ", prefix="worker-1"),
        lease_seconds=LEASE_SECONDS,
    )


def test_chaos__worker_stopped_inside_a_transaction__does_not_stall_the_others(chaos):
    """A stall can land between two statements of a claim, heartbeat or completion: the
    paused process then holds row locks (tenant, schedule, run) that no lease covers."""
    load = chaos.burst(BURST)
    chaos.start(workers=2, concurrency=4)
    chaos.wait_terminal(load, BURST // 5)

    held = chaos.stop_inside_transaction("worker-1")
    chaos.worker("worker-3")
    # Every run finishes while worker-1 stays stopped with its transaction open.
    chaos.settle(load, timeout=60)
    chaos.processes.signal("worker-1", signal.SIGCONT)

    report = chaos.check(load)
    assert report.by_state == {RunState.SUCCEEDED: BURST}
    chaos.figures("worker SIGSTOP inside a transaction", report, faults=1,
                  held=repr(" | ".join(q[:60] for q in held)))


def test_chaos__worker_killed_after_upload_before_completion__upload_stays_an_orphan(chaos):
    doomed = ("doomed-1", "doomed-2", "doomed-3")
    load = chaos.burst(BURST)
    chaos.start(workers=2, concurrency=3)
    chaos.wait_terminal(load, BURST // 6)
    for name in doomed:  # each dies (SIGKILL, by failpoint) after its first upload
        chaos.worker(name, solo=True, failpoints="after_upload_before_complete")
    labels = [chaos.worker_label(name) for name in doomed]
    wait_until(lambda: not any(chaos.alive(name) for name in doomed), timeout=60,
               message="the doomed workers to die after uploading")
    chaos.settle(load)

    report = chaos.check(load)
    assert report.by_state == {RunState.SUCCEEDED: BURST}
    killed = list(Attempt.objects.filter(worker_label__in=labels))
    assert len(killed) == len(doomed)
    for attempt in killed:
        upload = StoredObject.objects.get(attempt=attempt)
        assert upload.version_id and upload.state == ObjectState.STAGED  # uploaded, never published
        assert attempt.state == AttemptState.EXPIRED
        run = Run.objects.get(id=attempt.run_id)
        assert run.accepted_attempt.number > attempt.number and run.result_key != upload.key
    assert report.orphan_uploads >= len(doomed)
    chaos.figures("worker SIGKILL after upload", report, faults=len(doomed), killed_after_upload=len(killed))


def test_chaos__completion_reply_dropped__worker_repeats_it_and_gets_the_saved_answer(chaos):
    # Some fail transiently on every attempt. The jobs are short: what is counted is completions
    # and their answers, not how long the jobs ran.
    load = chaos.burst(BURST, seconds=(0.05, 0.25), fail_every=16)
    for name in ("worker-1", "worker-2"):
        chaos.worker(name, failpoints="drop_completion_reply")
    chaos.scanner()  # releases retries when their backoff ends
    chaos.relay()
    chaos.sweeper()
    chaos.settle(load)

    report = chaos.check(load)
    failing = BURST // 16
    assert report.by_state == {RunState.SUCCEEDED: BURST - failing, RunState.FAILED: failing}
    assert Run.objects.filter(id__in=load.run_ids, state=RunState.FAILED, attempt_count=MAX_ATTEMPTS).count() == failing
    succeeded = Attempt.objects.filter(run_id__in=load.run_ids, state=AttemptState.SUCCEEDED).count()
    failed = Attempt.objects.filter(run_id__in=load.run_ids, state=AttemptState.FAILED).count()
    repeated = chaos.count_in_logs(r"failpoint drop_completion_reply: repeating complete")
    assert repeated == succeeded + failed
    # Every repeat was answered with the saved run: the runtime reports the first answer's
    # outcome, never a refusal (stale) or a conflict.
    assert chaos.count_in_logs(r"outcome=succeeded ") == succeeded == BURST - failing
    assert chaos.count_in_logs(r"outcome=failed ") == failed
    assert chaos.count_in_logs(r"InvalidState|conflict") == 0
    chaos.figures("completion reply dropped", report, faults=repeated, repeated_completions=repeated)
