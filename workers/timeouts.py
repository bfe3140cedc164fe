"""Hard timeouts: a job still running at its job type's timeout is stopped, whether or not it
ever checks in (``ctx.checkpoint()``, ``ctx.sleep()``).

- Soft, at the timeout: ``JobTimedOut`` is raised in the job. On the process's main thread
  (a Celery prefork process, a slot process of the embedded pool: workers.job_processes) by
  SIGALRM, whose handler raises it; the signal also interrupts a blocking system call (a
  socket read, ``select``, a sleep in C), so a job stuck in one raises too. On another
  thread (a Celery pool process's idle claims) it is raised asynchronously at the job's next
  bytecode: a busy loop reaches it, a blocked call does not.
- Hard, ``JOB_HARD_TIMEOUT_GRACE_SECONDS`` later, if the job has still not returned (a C call
  that does not come back, a job that swallows the exception): in a process that may be ended
  (``allow_process_exit``: Celery's prefork pool processes and the embedded pool's slot
  processes, whose parents start another; a Celery solo worker, whose supervisor does), the
  watchdog thread records the attempt failed with reason ``timeout`` and ends the process
  (SIGKILL). No worker runs jobs anywhere else: a Celery pool of threads or greenlets is refused
  at start-up (scheduler_project.celery). Only a process calling the runtime itself (a test, a
  benchmark) is never ended: there the watchdog only says so in the log.

Either way the authority does not depend on it: no lease outlasts the attempt's deadline
(the job's start + timeout, database time: runtime._start_on_time) by more than
``JOB_TIMEOUT_LEASE_GRACE_SECONDS``, and the sweeper records a lease that ended there as a
timeout (runs.authority.sweep).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from django.conf import settings

from workers.jobs.framework import JobContext, JobTimedOut

log = logging.getLogger(__name__)

_may_exit = False  # this process may be ended at a hard timeout (its parent or supervisor replaces it)


def allow_process_exit() -> None:
    """Called in a process that another starts again when it ends: a Celery prefork pool
    process or solo worker (scheduler_project.celery), an embedded pool's slot process
    (workers.job_processes)."""
    global _may_exit
    _may_exit = True


def timeout_error(ctx: JobContext) -> str:
    return f"timed out after {ctx.control.timeout_seconds or 0:g}s"


class _Guard:
    """One job under its limits: where it runs, and which limits have fired."""

    def __init__(self, ctx: JobContext, on_hard: Callable[[], object]):
        self.ctx = ctx
        self.on_hard = on_hard
        self.soft_at = ctx.control.deadline
        self.hard_at = ctx.control.deadline + settings.JOB_HARD_TIMEOUT_GRACE_SECONDS
        self.thread_id = threading.get_ident()
        self.main = threading.current_thread() is threading.main_thread()
        self.lock = threading.Lock()
        self.inside = True  # the job has not returned yet
        self.soft_sent = self.hard_sent = self.raised = False

    def next_at(self) -> float:
        return self.hard_at if self.soft_sent else self.soft_at

    def fire(self) -> bool:
        """The limit due now; True once nothing is left to fire."""
        if not self.soft_sent:
            self._soft()
            return False
        self._hard()
        return True

    def _soft(self) -> None:
        with self.lock:
            if not self.inside or self.soft_sent:
                return
            self.soft_sent = True
            if self.main:
                signal.pthread_kill(self.thread_id, signal.SIGALRM)
            else:
                _async_raise(self.thread_id, JobTimedOut)
        log.warning("run=%s attempt=%s reached its timeout: interrupting the job", self.ctx.run_id, self.ctx.attempt_id)

    def _hard(self) -> None:
        with self.lock:
            if not self.inside or self.hard_sent:
                return
            self.hard_sent = True
        ctx = self.ctx
        if not _may_exit:
            log.error("run=%s attempt=%s is still running %gs past its timeout and this process may not be "
                      "ended: its lease ends on database time and the sweeper records the timeout",
                      ctx.run_id, ctx.attempt_id, settings.JOB_HARD_TIMEOUT_GRACE_SECONDS)
            return
        log.error("run=%s attempt=%s is still running %gs past its timeout: recording it and ending process %d",
                  ctx.run_id, ctx.attempt_id, settings.JOB_HARD_TIMEOUT_GRACE_SECONDS, os.getpid())
        try:
            self.on_hard()
        except BaseException:  # the lease still ends at the deadline; the sweeper records it
            log.exception("recording the timeout of run=%s failed", ctx.run_id)
        finally:
            logging.shutdown()  # flush what was said
            os.kill(os.getpid(), signal.SIGKILL)

    def leave(self) -> None:
        """The job returned (or raised): nothing may interrupt it any more."""
        while True:
            try:
                with self.lock:
                    self.inside = False
                    if self.soft_sent and not self.main:
                        _async_raise(self.thread_id, None)  # withdraw one not yet delivered
                return
            except JobTimedOut:  # delivered just now, on the way out
                continue


def _async_raise(thread_id: int, exc_type) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc_type) if exc_type is not None else None)


class _Watchdog:
    """One thread per process firing every guarded job's limits when they fall due."""

    def __init__(self):
        self._cond = threading.Condition()
        self._guards: set[_Guard] = set()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def watch(self, guard: _Guard) -> None:
        with self._cond:
            self._guards.add(guard)
            # A forked process inherits the watchdog but not its thread: one per process.
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="job-timeouts", daemon=True)
                self._thread.start()
            self._cond.notify()

    def forget(self, guard: _Guard) -> None:
        with self._cond:
            self._guards.discard(guard)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [guard for guard in self._guards if guard.next_at() <= now]
                if not due:
                    wake = min((guard.next_at() for guard in self._guards), default=None)
                    self._cond.wait(None if wake is None else wake - now)
                    continue
            for guard in due:
                if guard.fire():
                    self.forget(guard)


_watchdog = _Watchdog()
_main_guard: _Guard | None = None  # the job on the main thread, for the SIGALRM handler


def _on_alarm(signum, frame) -> None:
    guard = _main_guard
    if guard is not None and guard.inside and guard.soft_sent and not guard.raised:
        guard.raised = True
        raise JobTimedOut(timeout_error(guard.ctx))


@contextmanager
def hard_limits(ctx: JobContext, on_hard: Callable[[], object]):
    """Run the job in the block under its timeout; ``on_hard`` records the timeout before
    the process is ended. Nothing to do for a job without a timeout."""
    global _main_guard
    if ctx.control.deadline is None:
        yield
        return
    guard = _Guard(ctx, on_hard)
    previous = None
    if guard.main:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        _main_guard = guard
    _watchdog.watch(guard)
    try:
        yield
    finally:
        guard.leave()
        _watchdog.forget(guard)
        if guard.main:
            _main_guard = None
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
