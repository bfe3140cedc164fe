"""One heartbeat per worker process.

The lease keeper extends the lease of every attempt its process holds in one authority
transaction per interval (``authority.heartbeat_many``), and relays the answers to each
attempt's job: cancellation requested, or ownership lost. A process holding a thousand
attempts costs one transaction per interval, not a thousand.

Only the authority's answers decide ownership. The keeper's own clock serves one purpose:
knowing when a lease has certainly passed (``lease_may_be_valid``), so that a worker stops
retrying a completion the authority can no longer accept.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError, connection

from runs import authority, metrics
from workers.jobs.framework import JobControl

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.05
# A dropped connection or a failover: the call may or may not have committed; repeat it.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


@dataclass
class _Held:
    fence: int
    interval: float
    lease_seconds: float
    control: JobControl
    confirmed_at: float  # monotonic time of the last answer that extended (or granted) the lease
    completing: bool = False  # its completion may commit any moment: a missing answer is not a loss


class LeaseKeeper:
    def __init__(self):
        self._lock = threading.Lock()
        self._beating = threading.Lock()  # a release waits for an in-flight beat
        self._held: dict[str, _Held] = {}
        self._wake = threading.Event()
        self._last_beat = time.monotonic()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def hold(self, attempt_id: str, fence: int, *, lease_seconds: float, interval: float, control: JobControl,
             claimed_at: float) -> None:
        """Keep ``attempt_id``'s lease alive from now on; ``claimed_at`` is the monotonic
        time just after the claim's answer arrived."""
        with self._lock:
            if not self._held:
                self._last_beat = time.monotonic()  # an idle keeper owes nobody a beat yet
            self._held[attempt_id] = _Held(fence, max(MIN_INTERVAL, interval), lease_seconds, control, claimed_at)
            self._start_thread()
        self._wake.set()  # a shorter interval may apply from now on

    def completing(self, attempt_id: str) -> None:
        """The attempt's completion is about to be sent: keep its lease alive while it is
        retried, but do not count a refused beat as a loss."""
        with self._lock:
            if attempt_id in self._held:
                self._held[attempt_id].completing = True

    def release(self, attempt_id: str) -> None:
        with self._beating, self._lock:
            self._held.pop(attempt_id, None)
            idle = not self._held
        if idle:
            self._wake.set()  # let the thread close its connection while nothing is held

    def holding(self, attempt_id: str) -> bool:
        with self._lock:
            return attempt_id in self._held

    def lease_may_be_valid(self, attempt_id: str) -> bool:
        """False once the lease has certainly passed: more than a lease since the last
        answer that extended it (that extension happened before the answer arrived)."""
        with self._lock:
            held = self._held.get(attempt_id)
            return held is not None and time.monotonic() < held.confirmed_at + held.lease_seconds

    def beat(self) -> None:
        """One heartbeat for every held attempt (the keeper's thread calls it every interval)."""
        with self._beating:
            with self._lock:
                snapshot = {attempt_id: held for attempt_id, held in self._held.items()}
            if not snapshot:
                return
            sent = time.monotonic()
            try:
                alive = authority.heartbeat_many([(a, held.fence) for a, held in snapshot.items()])
            except TRANSIENT_DB_ERRORS as exc:
                # The leases may still stand; if not, the next beat's answer says so.
                log.warning("heartbeat for %d attempts failed, retrying next beat: %s", len(snapshot), exc)
                connection.close()
                return
            except Exception:  # the keeper must outlive any one bad beat
                log.exception("heartbeat for %d attempts failed", len(snapshot))
                connection.close()
                return
            lost = []
            with self._lock:
                for attempt_id, held in snapshot.items():
                    if attempt_id in alive:
                        held.confirmed_at = sent
                        if alive[attempt_id]:
                            held.control.request_cancel()
                    elif not held.completing and self._held.get(attempt_id) is held:
                        del self._held[attempt_id]
                        lost.append(held)
            for held in lost:
                held.control.mark_lost("heartbeat refused: this attempt no longer owns the run")
            if lost:
                metrics.STALE_REJECTIONS.labels("heartbeat").inc(len(lost))

    def _start_thread(self) -> None:
        # Celery's prefork children inherit the keeper but not its thread: start one per process.
        if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                interval = min((held.interval for held in self._held.values()), default=None)
                due_in = None if interval is None else self._last_beat + interval - time.monotonic()
            if due_in is None:
                connection.close()  # idle: hold no database connection
            if due_in is None or due_in > 0:
                if self._wake.wait(due_in):
                    self._wake.clear()  # held attempts changed: work out the next beat again
                continue
            self._last_beat = time.monotonic()
            self.beat()


_keeper = LeaseKeeper()


def lease_keeper() -> LeaseKeeper:
    return _keeper
