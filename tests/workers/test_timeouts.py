"""workers.timeouts in this process: the soft limit interrupts a job that never checks in, on
the main thread (SIGALRM, out of a blocking socket read too) and on another thread (an
asynchronous exception, out of a busy loop); nothing fires once the job has returned, and
in a process that may not be ended the hard limit only says so."""

import socket
import threading
import time

import pytest

from workers import timeouts
from workers.jobs.framework import JobContext, JobControl, JobTimedOut


def context(timeout: float) -> JobContext:
    control = JobControl(timeout_seconds=timeout)
    control.start()
    return JobContext(run_id="run_x", attempt_id="att_x", fence=1, scheduled_at=None, timezone="UTC", params={},
                      control=control)


def blocked_read():
    silent, _peer = socket.socketpair()
    silent.recv(1)


def busy_loop():
    while True:
        pass


@pytest.mark.parametrize("job", [blocked_read, busy_loop])
def test_main_thread__a_job_that_never_checks_in__interrupted_at_its_timeout(job):
    hard = []
    started = time.monotonic()
    with pytest.raises(JobTimedOut):
        with timeouts.hard_limits(context(0.3), on_hard=lambda: hard.append(1)):
            job()
    assert 0.3 <= time.monotonic() - started < 1.0
    assert not hard


def test_other_thread__a_busy_loop__interrupted_at_its_timeout():
    raised = []

    def run():
        try:
            with timeouts.hard_limits(context(0.3), on_hard=lambda: None):
                busy_loop()
        except JobTimedOut:
            raised.append(time.monotonic())

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert raised and 0.3 <= raised[0] - started < 1.0


def test_a_job_that_returned_in_time__nothing_fires_after(settings):
    settings.JOB_HARD_TIMEOUT_GRACE_SECONDS = 0.1
    hard = []
    with timeouts.hard_limits(context(0.2), on_hard=lambda: hard.append(1)):
        pass
    time.sleep(0.5)  # past the timeout and the hard limit: no SIGALRM, no hard path
    assert not hard


def test_hard_limit_in_a_process_that_may_not_be_ended__only_logged(settings, caplog):
    settings.JOB_HARD_TIMEOUT_GRACE_SECONDS = 0.2
    hard = []

    def swallowing():
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except JobTimedOut:
                pass

    with timeouts.hard_limits(context(0.2), on_hard=lambda: hard.append(1)):
        swallowing()
    assert not hard  # this test process may not be ended: nothing recorded, nothing killed
    assert "may not be ended" in caplog.text
