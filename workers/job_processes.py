"""The embedded pool's job processes: each slot thread of the embedded dispatcher hands the
batches it claimed to a process of its own, which executes them on its main thread. So a job
past its timeout is interrupted there, and, if it still does not return, that process is
ended (workers.timeouts); the slot starts another for its next batch. The dispatcher's own
process never runs job code.

The processes are spawned, not forked: a fork would inherit the dispatcher's open database
connections and threads. Each one sets Django up once (about half a second), then serves
batches until its slot stops; it ignores SIGINT and SIGTERM, which reach the whole process
group, and leaves when its slot tells it to or the dispatcher is gone (its pipe closes), so
a stop finishes the batches in hand.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading

log = logging.getLogger(__name__)

_context = multiprocessing.get_context("spawn")


class JobProcess:
    def __init__(self):
        self.conn, child = _context.Pipe()
        self.process = _context.Process(target=_serve, args=(child,), name="embedded-jobs", daemon=True)
        self.process.start()
        child.close()

    def started(self) -> JobProcess:
        """Once Django is set up in it (a slot claims nothing before its process can start the job)."""
        try:
            self.conn.recv()
        except (EOFError, OSError):
            pass  # it ended at once: its first batch finds out
        return self

    def execute(self, runs, claimed_at: float) -> list | None:
        """The batch's outcomes (runtime.ExecutionOutcome); None when the process ended meanwhile."""
        try:
            self.conn.send((runs, claimed_at))
            return self.conn.recv()
        except (EOFError, OSError):
            return None

    def stop(self, timeout: float = 10.0) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class JobProcesses:
    """The job processes of one pool: as many as its slots, each executing one batch at a
    time; one that ended is replaced when a slot next needs one."""

    def __init__(self, size: int):
        starting = [JobProcess() for _ in range(size)]  # at once, side by side
        self._idle = [job_process.started() for job_process in starting]
        self._lock = threading.Lock()

    def execute(self, runs, claimed_at: float) -> list:
        """Execute runs claimed at ``claimed_at`` (monotonic, one clock for every process of
        the host) in an idle job process (runtime.execute_batch). An ended
        process's runs answer nothing: their attempts were recorded as timed out before it
        ended, else their leases end at their deadlines and the sweeper records them."""
        with self._lock:
            job_process = self._idle.pop() if self._idle else None
        if job_process is None or not job_process.process.is_alive():
            job_process = JobProcess().started()
        outcomes = job_process.execute(runs, claimed_at)
        if outcomes is None:
            job_process.process.join(5)
            log.error("the job process %s executing %s ended (exit code %s); a new one takes its place",
                      job_process.process.pid, [run.id for run in runs], job_process.process.exitcode)
            job_process = JobProcess().started()  # before the slot is free again
            outcomes = []
        with self._lock:
            self._idle.append(job_process)
        return outcomes

    def stop(self) -> None:
        """Stop the idle processes (call once the slots' threads are done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for job_process in idle:
            job_process.stop()


def _serve(conn) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import django

    django.setup()
    from workers import timeouts
    from workers.runtime import execute_batch

    timeouts.allow_process_exit()
    conn.send("started")
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        runs, claimed_at = message
        conn.send(execute_batch(runs, claimed_at=claimed_at))
