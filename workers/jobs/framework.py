"""The job framework: what a job is, what it may call, and the registry of approved jobs.

A job is a function ``(ctx: JobContext) -> JobOutput`` registered under its job type's
name with ``@job(name)``. It must be deterministic for one run (same params, same
scheduled instant → same bytes), so a retried upload of the same attempt has the same
checksum. It calls ``ctx.checkpoint()`` between stages and sleeps only through
``ctx.sleep()``, which is where cancellation, lost ownership and the timeout reach it.

Job authors use ``job``, ``JobContext``, ``JobOutput``, ``TransientJobError`` and
``PermanentJobError``; the runtime uses ``JobControl``, the ``JobInterrupted`` family and
``get_job``. The catalog (resource class, lease, timeout, schema) is schedules.job_types;
the built-in jobs are workers.jobs.builtin, imported by the workers app when Django starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@dataclass(frozen=True)
class JobOutput:
    data: bytes
    content_type: str
    filename: str


class TransientJobError(Exception):
    """Worth retrying: the authority schedules another attempt with backoff."""


class PermanentJobError(Exception):
    """Retrying cannot help (bad params, invalid report query). Any other exception counts as this."""


class JobInterrupted(BaseException):
    """Raised by checkpoints. A BaseException, so a job's own ``except Exception`` cannot swallow it."""


class JobCanceled(JobInterrupted):
    """The client asked to cancel (seen through a heartbeat)."""


class JobTimedOut(JobInterrupted):
    """The job ran past its job type's timeout."""


class JobLost(JobInterrupted):
    """The authority no longer recognizes this attempt's fence: its output can never be canonical."""


class JobControl:
    """Signals from the runtime's heartbeat thread to the job, read at every checkpoint."""

    def __init__(self, timeout_seconds: float | None = None):
        self.deadline = time.monotonic() + timeout_seconds if timeout_seconds else None
        self.timeout_seconds = timeout_seconds
        self.cancel_requested = threading.Event()
        self.lost = threading.Event()
        self.lost_reason = ""
        self._wake = threading.Event()  # interrupts ctx.sleep() the moment either flag is set

    def request_cancel(self) -> None:
        self.cancel_requested.set()
        self._wake.set()

    def mark_lost(self, reason: str) -> None:
        self.lost_reason = reason
        self.lost.set()
        self._wake.set()

    def wait(self, seconds: float) -> None:
        self._wake.wait(seconds)


@dataclass
class JobContext:
    run_id: str
    attempt_id: str
    fence: int
    scheduled_at: datetime  # aware, UTC
    timezone: str  # the schedule's IANA zone, for calendar meaning ("the report for Tuesday")
    params: dict
    control: JobControl = field(default_factory=JobControl)

    SLEEP_SLICE = 0.25  # upper bound on how late a sleeping job notices its deadline

    def checkpoint(self) -> None:
        control = self.control
        if control.lost.is_set():
            raise JobLost(control.lost_reason or "attempt no longer owns the run")
        if control.cancel_requested.is_set():
            raise JobCanceled("cancellation requested")
        if control.deadline is not None and time.monotonic() >= control.deadline:
            raise JobTimedOut(f"timed out after {control.timeout_seconds:g}s")

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while True:
            self.checkpoint()
            now = time.monotonic()
            if now >= end:
                return
            wait = min(end - now, self.SLEEP_SLICE)
            if self.control.deadline is not None:
                wait = min(wait, max(0.0, self.control.deadline - now))
            self.control.wait(wait)

    def local_date(self) -> date:
        """The scheduled instant's calendar date in the schedule's time zone."""
        try:
            zone = ZoneInfo(self.timezone or "UTC")
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise PermanentJobError(f"unknown time zone {self.timezone!r}") from exc
        return self.scheduled_at.astimezone(zone).date()


JobFunction = Callable[[JobContext], JobOutput]
JOBS: dict[str, JobFunction] = {}


def job(name: str):
    """Register the decorated function as the approved implementation of job type ``name``."""

    def register(fn: JobFunction) -> JobFunction:
        JOBS[name] = fn
        return fn

    return register


def get_job(name: str) -> JobFunction:
    try:
        return JOBS[name]
    except KeyError:
        raise PermanentJobError(f"no approved implementation for job type {name!r}") from None
