"""The embedded pool (``manage.py dispatch``): the design's baseline without a broker,
claiming straight from the run table into a bounded local pool per resource class."""

import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from workers import batching, intake

log = logging.getLogger(__name__)


class EmbeddedDispatcher:
    """The design's baseline without a broker: claim straight from the run table into a
    bounded local pool per resource class. Claims are weighted-fair and respect limits, and
    take only runs of the job types this process has code for (the others wait for a
    dispatcher that has it; they are counted every ``UNKNOWN_CHECK_SECONDS`` at most)."""

    UNKNOWN_CHECK_SECONDS = 5.0

    def __init__(self, pools: dict[str, int], *, poll_interval: float = 0.2, lease_seconds: int | None = None,
                 job_processes: bool = False):
        """``job_processes``: execute jobs in processes of their own (workers.job_processes),
        which a hard timeout may end; else on the pool's threads, where a job past its
        timeout is only interrupted when it checks in (the dispatch command uses processes)."""
        from workers.job_processes import JobProcesses

        self.pools = pools
        self.processes = {rc: JobProcesses(n) for rc, n in pools.items()} if job_processes else None
        self.poll_interval = poll_interval
        self.lease_seconds = lease_seconds
        self.label = f"embedded:{socket.gethostname()}:{os.getpid()}"
        self.executors = {rc: ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"job-{rc}") for rc, n in pools.items()}
        self.busy = {rc: 0 for rc in pools}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.unknown_checked_at = {rc: float("-inf") for rc in pools}

    def run(self, stopper) -> None:
        from workers.capacity_report import SlotReporter

        reporter = SlotReporter(self.label, self.pools).start()
        try:
            self._loop(stopper)
        finally:
            reporter.stop()

    def _loop(self, stopper) -> None:
        while not stopper.stopped:
            claimed = 0
            try:
                close_old_connections()
                claimed = self.dispatch_once()
            except (DatabaseError, InterfaceError) as exc:
                log.warning("dispatcher: database error, reconnecting: %s", exc)
                connection.close()
            if not claimed:
                self.wake.wait(self.poll_interval)
                self.wake.clear()
        for executor in self.executors.values():
            executor.shutdown(wait=True)
        for processes in (self.processes or {}).values():
            processes.stop()

    def dispatch_once(self) -> int:
        """Claim for every free slot, each slot a batch as big as this process takes at
        once for the class (workers.batching), in one claim; every batch runs on one pool thread."""
        claimed = 0
        for rc, size in self.pools.items():
            with self.lock:
                free = size - self.busy[rc]
            if free <= 0:
                continue
            limit = free * batching.claim_size(rc, batching.class_batch(rc))
            # COUNT: no hint brought the claim (nothing to hand back to the relay), and the
            # pool polls every poll_interval: it counts the runs it lacks code for at most
            # once per UNKNOWN_CHECK_SECONDS, not at every poll.
            counting = time.monotonic() - self.unknown_checked_at[rc] >= self.UNKNOWN_CHECK_SECONDS
            handed = intake.take(rc, worker_label=self.label, limit=limit, lease_seconds=self.lease_seconds,
                                 unknown=intake.COUNT if counting else None,
                                 execute=lambda runs, rc=rc, free=free: self._hand_to_slots(rc, runs, free))
            if counting and len(handed) < limit:
                self.unknown_checked_at[rc] = time.monotonic()
            claimed += len(handed)
        return claimed

    def _hand_to_slots(self, rc: str, runs, free: int) -> list:
        """Spread claimed runs over the free slots, one batch per slot; the runs handed over."""
        claimed_at = time.monotonic()
        for batch in (runs[slot::free] for slot in range(min(free, len(runs)))):
            with self.lock:
                self.busy[rc] += 1
            self.executors[rc].submit(self._execute, rc, batch, claimed_at)
        return runs

    def _execute(self, rc: str, runs, claimed_at: float) -> None:
        try:
            intake.execute_claimed_runs(rc, runs, claimed_at=claimed_at,
                                        executor=self.processes[rc].execute if self.processes else None)
        except Exception:
            log.exception("execution of %s crashed; the sweeper will recover them", [run.id for run in runs])
        finally:
            # The thread keeps its connection for the next batch, as a request's thread does;
            # one past CONN_MAX_AGE, left in a transaction or broken by an error is closed.
            close_old_connections()
            with self.lock:
                self.busy[rc] -= 1
            self.wake.set()
