"""A worker process reports its slots per resource class (runs.capacity.live) every
CAPACITY_REPORT_INTERVAL_SECONDS from a thread of its own, and withdraws them when it stops.
The embedded dispatcher reports its pools; a Celery worker its concurrency for each
resource-class queue it consumes (scheduler_project/celery.py)."""

import logging
import threading

from django.conf import settings
from django.db import connection

from runs.capacity.live import slots_report, slots_withdraw

log = logging.getLogger(__name__)


class SlotReporter:
    def __init__(self, process: str, slots: dict[str, int], *, interval: float | None = None):
        self.process = process
        self.slots = {rc: n for rc, n in slots.items() if n > 0}
        self.interval = settings.CAPACITY_REPORT_INTERVAL_SECONDS if interval is None else interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "SlotReporter":
        self._thread = threading.Thread(target=self._run, name="slot-reporter", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                slots_report(self.process, self.slots)
            except Exception as exc:  # a missed report only ages this process's row
                log.warning("slot report of %s failed: %s", self.process, exc)
                connection.close()
            self._stop.wait(self.interval)
        connection.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            slots_withdraw(self.process)
        except Exception as exc:
            log.warning("withdrawing the slots of %s failed (they expire by themselves): %s", self.process, exc)
        finally:
            connection.close()
