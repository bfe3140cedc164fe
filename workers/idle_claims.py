"""Free worker processes claim from the authority when their worker's queues stay quiet.

Hints in Redis are only hints; PostgreSQL is the truth. A hint can be lost (a broker
restarted without persistence, a purged queue), and while the broker is away none arrives
at all. The relay republishes lost hints once it sees them lost, but meanwhile queued runs
wait while processes are free, and under overlap ``buffer_one`` a run still queued at its
schedule's next instant skips that instant. So once a Celery worker has received nothing
from its queues for ``IDLE_CLAIM_SECONDS``, its free pool processes claim queued runs of the
worker's resource classes straight from the authority, the way a hint makes them claim
(``workers.intake.take``: fenced claims under SKIP LOCKED, fair shares, tenant
limits, the process's batch size). A hint that arrives later for a run claimed this way
finds nothing and is dropped.

How it hooks into Celery (prefork):

* Not in the worker's main process. While the broker is away, the consumer sits in its
  reconnect loop, and the event loop (which alone hands work to the pool processes and
  reads their results) does not run. So every pool process runs a thread of its own that
  claims and executes in that process: the capacity the worker already has. The solo pool
  runs the same thread in the worker process.
* A process runs one thing at a time: a task holds ``_executing`` from ``task_prerun`` to
  ``task_postrun``, the thread while it claims and executes a batch. The thread only tries
  it, so it never takes a busy process; a task handed to a process meanwhile waits for
  that batch (about 0.1 s of short jobs, one run of long ones: workers.batching), which can
  only happen just after the queues had been quiet. Each closes the other's database
  connection as it takes the lock (tasks keep theirs between tasks: scheduler_project/
  celery.py), so a process still holds at most two, with the lease keeper's
  (docs/operations.md).
* Quiet: ``Node``, shared memory the main process creates before the pool forks, holds the
  monotonic time the main process last received a task (``task_received``). While tasks
  keep arriving, the threads only read that time, ten times a second, with no database.
  When the main process loses the broker (workers.consumer), the worker is quiet at once:
  nothing can arrive before it is back, and runs whose hints were lost with it are due.
* Cheap when nothing is queued: of a worker's free processes, one per interval asks the
  authority whether anything is claimable (``claimable_exists``: one read of the partial
  index of queued runs). The same process keeps asking, on the connection it keeps, until
  a task takes it (another then takes over). Only when something is claimable do the free
  processes claim, each its own batch, and they go on while claims find work. With nothing
  queued, a worker costs one indexed read per ``IDLE_CLAIM_SECONDS`` and no new connection.

Threads, eventlet and gevent pools are left out: Celery sends them no per-process signal.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import threading
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from runs import authority, metrics
from workers import batching, intake
from workers.jobs.framework import declared_jobs

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # how often a free process looks at the shared times (no database)
TAKE_OVER_SECONDS = 3 * POLL_SECONDS  # the last asker is busy or gone: another asks after this
WARN_EVERY_SECONDS = 30.0  # the database away: one warning per process this often
PROBE, CLAIM = "probe", "claim"


class Node:
    """Times one Celery worker's processes share: monotonic seconds, one clock for every
    process of the host. Created in the main process before its pool forks."""

    LAST_RECEIVED, NEXT_PROBE, WORK_SEEN, PROBER = range(4)

    def __init__(self, resource_classes, interval: float):
        self.resource_classes = list(resource_classes)
        self.interval = interval
        # The worker's, as a hint task labels its attempts (workers.tasks): host, main process.
        self.label = f"celery:{socket.gethostname()}:{os.getpid()}"
        self._times = multiprocessing.RawArray("d", [time.monotonic(), 0.0, float("-inf"), 0.0])
        self._lock = multiprocessing.Lock()

    def received(self) -> None:
        self._times[self.LAST_RECEIVED] = time.monotonic()

    def lost_broker(self) -> None:
        """Nothing will come from the queues for a while: quiet now, and asking at once."""
        with self._locked():
            self._times[self.LAST_RECEIVED] = time.monotonic() - self.interval
            self._times[self.NEXT_PROBE] = float("-inf")

    def quiet(self, now: float) -> bool:
        return now - self._times[self.LAST_RECEIVED] >= self.interval

    def turn(self, now: float, pid: int) -> str | None:
        """CLAIM while a process found work within the interval; PROBE for the one process
        that asks the authority in this interval, the one that asked last if it is free;
        None for the others."""
        with self._locked():
            times = self._times
            if now - times[self.WORK_SEEN] < self.interval:
                return CLAIM
            if now >= times[self.NEXT_PROBE] + (0 if times[self.PROBER] == pid else TAKE_OVER_SECONDS):
                times[self.NEXT_PROBE], times[self.PROBER] = now + self.interval, pid
                return PROBE
        return None

    def prober(self) -> int:
        return int(self._times[self.PROBER])

    def found(self, work: bool) -> None:
        self._times[self.WORK_SEEN] = time.monotonic() if work else float("-inf")

    @contextmanager
    def _locked(self):
        taken = self._lock.acquire(timeout=1.0)  # a process killed inside holds it forever: go on without
        try:
            yield
        finally:
            if taken:
                self._lock.release()


_node: Node | None = None  # this worker's, inherited by its pool processes
_claimer: IdleClaimer | None = None  # this process's thread
_executing = threading.RLock()  # held by a task, or by the thread's batch
_tasks = threading.local()
_task_db = None  # the tasks' connection, which the thread closes as it takes the process


def prepare(worker) -> None:
    """In the worker's main process (``worker_init``), before its pool forks."""
    global _node
    classes = [q for q in worker.app.amqp.queues.consume_from if q in settings.RESOURCE_CLASSES]
    if settings.IDLE_CLAIM_SECONDS > 0 and classes:
        _node = Node(classes, settings.IDLE_CLAIM_SECONDS)


def received() -> None:
    """The main process received a task (``task_received``)."""
    if _node is not None:
        _node.received()


def lost_broker() -> None:
    """The main process lost the broker (workers.consumer): its free processes need not wait
    out the interval, no task can arrive before it is back."""
    if _node is not None:
        _node.lost_broker()


def start() -> None:
    """In each pool process (``worker_process_init``), and in a solo worker itself."""
    global _claimer
    if _node is not None and _claimer is None:
        _claimer = IdleClaimer(_node).start()


def stop() -> None:
    """The process is leaving: claim no more, finish the batch in hand."""
    if _claimer is not None:
        _claimer.stop()


def task_started() -> None:
    global _task_db
    if _claimer is not None:
        _executing.acquire()
        _tasks.depth = getattr(_tasks, "depth", 0) + 1
        _claimer.close_connection()  # the thread is between turns: the lock says so
        if _task_db is None:
            _task_db = connections[DEFAULT_DB_ALIAS]
            _task_db.inc_thread_sharing()  # the thread closes it (IdleClaimer.turn)


def task_finished() -> None:
    if getattr(_tasks, "depth", 0):
        _tasks.depth -= 1
        _executing.release()


class IdleClaimer:
    def __init__(self, node: Node):
        self.node = node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="idle-claims", daemon=True)
        self._db = None  # the thread's connection; closed by a task taking the process
        self._warned_at = float("-inf")

    def start(self) -> IdleClaimer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def close_connection(self) -> None:
        """Only while holding ``_executing``: the thread uses its connection under it alone."""
        if self._db is not None:
            self._db.close()

    def _run(self) -> None:
        self._db = connections[DEFAULT_DB_ALIAS]
        self._db.inc_thread_sharing()  # a task closes it from its own thread (task_started)
        while not self._stop.wait(POLL_SECONDS):
            while not self._stop.is_set() and self.turn():
                pass

    def turn(self) -> bool:
        """One look; True when it executed runs (look again at once)."""
        if not _executing.acquire(blocking=False):
            return False
        keep = False  # the connection, for the next question or the next batch
        try:
            if self.node.quiet(time.monotonic()):
                if _task_db is not None:
                    _task_db.close()  # no task between them: the lock says so
                executed, keep = self._claim_if_any()
                return executed > 0
            return False
        except Exception as exc:  # the database away, mostly: the next look tries again
            self._warn(exc)
            return False
        finally:
            if not keep:
                self.close_connection()
            _executing.release()

    def _claim_if_any(self) -> tuple[int, bool]:
        """(runs executed, whether to keep the connection: while claims find work, and in the
        process that asks the authority)."""
        node, pid = self.node, os.getpid()
        turn = node.turn(time.monotonic(), pid)
        if turn is None:
            return 0, node.prober() == pid
        if turn == PROBE:
            if not authority.claimable_exists(resource_classes=node.resource_classes, job_types=list(declared_jobs())):
                return 0, True
            node.found(True)  # the other free processes claim too, without asking again
        executed = self._claim_and_execute()
        node.found(executed > 0)
        return executed, executed > 0 or node.prober() == pid

    def _claim_and_execute(self) -> int:
        for rc in self.node.resource_classes:
            # unknown=None: no hint brought this claim, so there is none to hand back, and
            # a claim that comes up short here is no news (hints to processes count those runs).
            executed = intake.take(rc, worker_label=self.node.label, limit=batching.claim_size(rc, batching.class_batch(rc)),
                                   unknown=None, on_claimed=lambda claimed, rc=rc: self._claimed(rc, claimed))
            if executed:
                return len(executed)
        return 0

    def _claimed(self, rc: str, claimed) -> None:
        metrics.IDLE_CLAIMED.labels(rc).inc(len(claimed))
        log.info("claimed %d queued runs of %s from the authority: no task received for %.1f s",
                 len(claimed), rc, self.node.interval)

    def _warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_SECONDS:
            self._warned_at = now
            log.warning("idle claims failed, trying again (said once per %.0f s): %s", WARN_EVERY_SECONDS, exc,
                        exc_info=True)
