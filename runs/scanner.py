"""The scanner process behind `manage.py scan`: bucket directory, timer horizon and poll.

Without pinned buckets the scanner joins the directory (runs.scan_directory) and serves
the buckets its lease holds, renewed every fifth of the lease. It keeps the next minute's
due instants of those buckets as timers (runs.timers), reloaded every
SCAN_TIMER_REFRESH_SECONDS and whenever its buckets change, and fires them at their
instant. A poll of the due index every ``interval`` seconds stays the backstop: whatever a
timer missed (an edit that moved an instant earlier, a row locked at the instant) is
found there, as is everything after a restart until the timers are loaded.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from runs import scan_directory
from runs.loops import Stopper, guarded, scan_pass
from runs.timers import FIRST_CHUNK, Timers, fire

log = logging.getLogger("scheduler.scan")


class ScanLoop:
    def __init__(self, *, buckets=None, interval: float = 1.0, batch_size: int | None = None,
                 timers: bool = True, stopper: Stopper | None = None):
        self.scanner_id = None if buckets is not None else scan_directory.new_scanner_id()
        self.buckets = list(buckets) if buckets is not None else []
        self.interval = interval
        self.batch_size = batch_size
        self.timers = Timers() if timers else None
        self.stopper = stopper or Stopper()
        self.renew_every = settings.SCAN_LEASE_SECONDS / 5
        self.next_renew = self.next_refresh = self.next_poll = 0.0  # time.monotonic()

    def run(self) -> None:
        try:
            while not self.stopper.stopped:
                if not guarded(self.tick, name="scan"):
                    self.stopper.wait(self.interval)  # database down: no tight retry loop
                    continue
                self.stopper.wait(self.sleep_seconds())
        finally:
            if self.timers is not None:
                self.timers.close()
            if self.scanner_id:
                guarded(lambda: scan_directory.leave(self.scanner_id), name="scan")

    def tick(self) -> None:
        # Due timers first: the directory renewal, the timers' refresh and the poll can wait
        # the few milliseconds a firing takes, the instant cannot (each fire is guarded in
        # the database, whoever holds the bucket's lease).
        self.fire_due()
        if self.scanner_id and time.monotonic() >= self.next_renew:
            buckets = scan_directory.renew(self.scanner_id)
            self.next_renew = time.monotonic() + self.renew_every
            if buckets != self.buckets:
                log.info("scan: serving %d buckets: %s", len(buckets), ",".join(map(str, buckets)))
                self.buckets = buckets
                self.next_refresh = 0.0
        if self.timers is not None:
            if time.monotonic() >= self.next_refresh:
                self.timers.load(self.buckets)
                self.next_refresh = time.monotonic() + settings.SCAN_TIMER_REFRESH_SECONDS
            self.fire_due()
        if time.monotonic() >= self.next_poll:
            stats = scan_pass(buckets=self.buckets, batch_size=self.batch_size)
            self.next_poll = time.monotonic() + self.interval
            if stats:
                log.info("scan: %s", stats)
                self.next_refresh = 0.0  # the instants after those the poll found: timers too

    def fire_due(self) -> None:
        """Fire the due timers: a wave's first few before the rest are even popped."""
        if self.timers is None:
            return
        for limit in (FIRST_CHUNK, None):
            fired = self.timers.pop_due(limit=limit)
            if fired:
                stats = fire(self.timers, fired, batch_size=self.batch_size)
                log.info("scan: timers=%d %s", len(fired), stats)

    def sleep_seconds(self) -> float:
        """Until the next timer, poll, renewal or refresh, whichever comes first."""
        now = time.monotonic()
        waits = [self.next_poll - now]
        if self.scanner_id:
            waits.append(self.next_renew - now)
        if self.timers is not None:
            waits.append(self.next_refresh - now)
            to_timer = self.timers.seconds_to_next()
            if to_timer is not None:
                waits.append(to_timer)
        return max(0.0, min(waits))
