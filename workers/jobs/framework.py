"""The job framework: what a job is, what it may call, and the registry of declared jobs.

A job is a function ``(ctx: JobContext) -> JobOutput`` declared with ``@scheduler_job``,
which also states its catalog entry (resource class, lease, timeout, retries, schema). It must be deterministic for one run (same params, same
scheduled instant → same bytes), so a retried upload of the same attempt has the same
checksum. It calls ``ctx.checkpoint()`` between stages and sleeps only through
``ctx.sleep()``, which is where cancellation, lost ownership and the timeout reach it.

Job authors import from ``workers.jobs``; the runtime uses ``JobControl``, the
``JobInterrupted`` family and ``get_job``; the catalog sync (workers.jobs.catalog) reads
``declared_jobs``. Modules holding declarations are imported at start (workers.jobs.discovery).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
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


@dataclass(frozen=True)
class JobDeclaration:
    """One job type: its catalog entry (the schedules.JobType row it is synced to) and its code."""

    name: str
    resource_class: str
    params_schema: dict
    params_schema_version: int
    default_lease_seconds: int
    timeout_seconds: int
    max_attempts: int
    initial_delay_seconds: float
    max_delay_seconds: float
    uncertain_effect_policy: str
    function: JobFunction = field(compare=False)

    def catalog_fields(self) -> dict:
        """The JobType columns this declaration owns, by column name."""
        fields = asdict(self)
        del fields["name"], fields["function"]
        return fields


JOBS: dict[str, JobDeclaration] = {}


def scheduler_job(
    name: str,
    *,
    resource_class: str = "short",
    params_schema: dict | None = None,
    params_schema_version: int = 1,
    lease_seconds: int = 30,
    timeout_seconds: int = 300,
    max_attempts: int = 3,
    initial_delay_seconds: float = 5,
    max_delay_seconds: float = 300,
    uncertain_effect_policy: str = "hold",
):
    """Declare the decorated function as job type ``name``, with its catalog entry.

    ``manage.py sync_job_types`` (and every ``migrate``) writes the entry to the catalog;
    changing ``params_schema`` takes a higher ``params_schema_version``.
    """

    def declare(fn: JobFunction) -> JobFunction:
        declared = JOBS.get(name)
        if declared is not None and _qualified_name(declared.function) != _qualified_name(fn):
            raise ValueError(f"job type {name!r} is declared twice: by {_qualified_name(declared.function)} "
                             f"and by {_qualified_name(fn)}")
        JOBS[name] = JobDeclaration(
            name=name, resource_class=resource_class,
            params_schema=params_schema or {"type": "object", "additionalProperties": False, "properties": {}},
            params_schema_version=params_schema_version, default_lease_seconds=lease_seconds,
            timeout_seconds=timeout_seconds, max_attempts=max_attempts, initial_delay_seconds=initial_delay_seconds,
            max_delay_seconds=max_delay_seconds, uncertain_effect_policy=uncertain_effect_policy, function=fn,
        )
        return fn

    return declare


def _qualified_name(fn: JobFunction) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def declared_jobs() -> dict[str, JobDeclaration]:
    """Every declared job type by name, in name order."""
    return dict(sorted(JOBS.items()))


def get_job(name: str) -> JobFunction:
    try:
        return JOBS[name].function
    except KeyError:
        raise PermanentJobError(f"no approved implementation for job type {name!r}") from None
