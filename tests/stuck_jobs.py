"""Jobs that never check in, for the hard-timeout tests (tests/e2e/test_hard_timeouts.py): a
team module named in SCHEDULER_JOB_MODULES. Each times out after TIMEOUT seconds and may be
tried twice; ``timeouts.quick`` is the job that shows the slot free again."""

import os
import socket
from pathlib import Path

from workers.jobs import JobContext, scheduler_job

TIMEOUT = 1
STUCK_IN_C = "timeouts.stuck_in_c"
BUSY_LOOP = "timeouts.busy_loop"
SWALLOWS = "timeouts.swallows"
QUICK = "timeouts.quick"
LIMITS = dict(resource_class="short", lease_seconds=30, timeout_seconds=TIMEOUT, max_attempts=2,
              initial_delay_seconds=0.2, max_delay_seconds=0.2)


def _started(ctx: JobContext) -> None:
    (Path(os.environ["JOB_GATE"]) / f"{ctx.run_id}-{ctx.attempt}").write_text(str(os.getpid()))


@scheduler_job(STUCK_IN_C, **LIMITS)
def stuck_in_c(ctx: JobContext) -> bytes:
    """Blocked in C: a read (select, then recv) on a socket nobody ever writes to."""
    _started(ctx)
    silent, _peer = socket.socketpair()
    silent.recv(1)
    return b"unreachable"


@scheduler_job(BUSY_LOOP, **LIMITS)
def busy_loop(ctx: JobContext) -> bytes:
    """Pure Python, never calling the context."""
    _started(ctx)
    n = 0
    while True:
        n += 1


@scheduler_job(SWALLOWS, **LIMITS)
def swallows(ctx: JobContext) -> bytes:
    """Blocked in C, and swallowing whatever interrupts it: only ending its process stops it."""
    _started(ctx)
    silent, _peer = socket.socketpair()
    while True:
        try:
            silent.recv(1)
        except BaseException:  # noqa: B036 - the point of this job
            pass


@scheduler_job(QUICK, resource_class="short", timeout_seconds=30)
def quick(ctx: JobContext) -> bytes:
    return b"done"
