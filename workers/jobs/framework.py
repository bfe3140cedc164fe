"""The job framework: what a job is, what it may call, and the registry of declared jobs.

A job is a function ``(ctx: JobContext)`` declared with ``@scheduler_job``, which also
states its catalog entry (resource class, lease, timeout, retries, schema); it returns its
output as bytes, a file or a ``JobOutput``, or streams it through ``ctx.output()``
(workers.jobs.output). It must be deterministic for one run (same params, same scheduled
instant → same bytes), so a retried upload of the same attempt has the same checksum. It
calls ``ctx.checkpoint()`` between stages and sleeps only through ``ctx.sleep()``, which is
where cancellation and lost ownership reach it; the timeout reaches any job, checking in or
not (workers.timeouts).

Job authors import from ``workers.jobs``; the runtime uses ``JobControl``, the
``JobInterrupted`` family and ``get_job``; the catalog sync (workers.jobs.catalog) reads
``declared_jobs``. Modules holding declarations are imported at start (workers.jobs.discovery).

The context (``JobContext``) is the documented surface a job may rely on: ``params``,
``scheduled_at`` (UTC) and ``scheduled_at_local`` (the schedule's zone), ``tenant``,
``attempt``, ``checkpoint()``, ``sleep()``, ``logger``, ``progress()`` and ``output()``;
and for the job's own writes, the fencing token: ``run_id`` (the occurrence), ``attempt_id``,
``fence`` (higher for every later attempt of the occurrence), which the helpers of
workers.jobs.fencing check in the team's table and bucket, and ``still_owner()``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from functools import cached_property
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runs.authority.run_progress import checked_progress
from workers.jobs.output import JobOutput, OutputWriter, resolve_output


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
        self.deadline = None  # set when the job starts: a claimed batch runs one job after another
        self.timeout_seconds = timeout_seconds
        self.cancel_requested = threading.Event()
        self.lost = threading.Event()
        self.lost_reason = ""
        self._wake = threading.Event()  # interrupts ctx.sleep() the moment either flag is set

    def start(self) -> None:
        """The job starts now: its timeout counts from here."""
        if self.timeout_seconds:
            self.deadline = time.monotonic() + self.timeout_seconds

    def request_cancel(self) -> None:
        self.cancel_requested.set()
        self._wake.set()

    def mark_lost(self, reason: str) -> None:
        self.lost_reason = reason
        self.lost.set()
        self._wake.set()

    def wait(self, seconds: float) -> None:
        self._wake.wait(seconds)


@dataclass(frozen=True)
class JobTenant:
    id: str
    name: str


class RunLogger(logging.LoggerAdapter):
    """A job's logger: every line names the run and the attempt (also as ``extra`` fields)."""

    def process(self, msg, kwargs):
        kwargs["extra"] = {**self.extra, **(kwargs.get("extra") or {})}
        return f"[run={self.extra['run_id']} attempt={self.extra['attempt']}] {msg}", kwargs


@dataclass
class JobContext:
    run_id: str
    attempt_id: str
    fence: int
    scheduled_at: datetime  # aware, UTC
    timezone: str  # the schedule's IANA zone, for calendar meaning ("the report for Tuesday")
    params: dict
    control: JobControl = field(default_factory=JobControl)
    attempt: int = 1  # 1 for the first attempt, 2 for the first retry, ...
    job_type: str = ""
    tenant_id: str = ""
    # Set by the runtime: the tenant's name by id, and the writer of progress to the run.
    tenant_loader: Callable[[str], str] | None = field(default=None, repr=False)
    progress_sink: Callable[[float, str], None] | None = field(default=None, repr=False)
    owner_check: Callable[[], bool] | None = field(default=None, repr=False)
    _progress_pending: tuple[float, str] | None = field(default=None, init=False, repr=False)
    _progress_sent_at: float | None = field(default=None, init=False, repr=False)
    _output: JobOutput | None = field(default=None, init=False, repr=False)
    _spools: list[str] = field(default_factory=list, init=False, repr=False)

    SLEEP_SLICE = 0.25  # upper bound on how late a sleeping job notices its deadline
    PROGRESS_INTERVAL = 1.0  # at most one progress write per attempt and second

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

    def still_owner(self) -> bool:
        """Whether this attempt still owns its run, asked of the authority now (one read on
        database time): for a call to a service no fence can guard, just before making it.
        A True answer can be outdated the moment it arrives (a pause right after it); a write
        the fence can guard goes through workers.jobs.fencing instead."""
        if self.control.lost.is_set():
            return False
        return self.owner_check() if self.owner_check is not None else True

    @property
    def scheduled_at_local(self) -> datetime:
        """The scheduled instant in the schedule's time zone (aware)."""
        try:
            zone = ZoneInfo(self.timezone or "UTC")
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise PermanentJobError(f"unknown time zone {self.timezone!r}") from exc
        return self.scheduled_at.astimezone(zone)

    def local_date(self) -> date:
        """The scheduled instant's calendar date in the schedule's time zone."""
        return self.scheduled_at_local.date()

    @cached_property
    def tenant(self) -> JobTenant:
        """The tenant the run belongs to (its name read once, on first use)."""
        return JobTenant(self.tenant_id, self.tenant_loader(self.tenant_id) if self.tenant_loader else "")

    @cached_property
    def logger(self) -> RunLogger:
        """A logger named ``jobs.<job type>`` whose lines carry the run id and attempt."""
        name = f"jobs.{self.job_type}" if self.job_type else "jobs"
        return RunLogger(logging.getLogger(name), {"run_id": self.run_id, "attempt": self.attempt})

    def progress(self, fraction: float, message: str = "") -> None:
        """How far the job has come, from 0 to 1, and what it is doing; shown as the run's
        ``progress``. Written at most once a second: a call within the second replaces the
        value, which the next call after it writes, or the job's return. ValueError for a
        fraction outside 0 to 1."""
        self._progress_pending = checked_progress(fraction, message)
        now = time.monotonic()
        if self._progress_sent_at is None or now - self._progress_sent_at >= self.PROGRESS_INTERVAL:
            self.flush_progress()

    def flush_progress(self) -> None:
        pending, self._progress_pending = self._progress_pending, None
        if pending is not None and self.progress_sink is not None:
            self._progress_sent_at = time.monotonic()
            self.progress_sink(*pending)

    @contextmanager
    def output(self, content_type: str = "application/octet-stream", filename: str = "") -> Iterator[OutputWriter]:
        """A streamed output: ``with ctx.output("text/csv", "export.csv") as out: out.write(chunk)``.
        The chunks go to a local spool file, never all into memory; the job then returns None."""
        if self._output is not None or self._spools:
            raise RuntimeError("a job writes one output")
        writer = OutputWriter()
        self._spools.append(writer.path)
        try:
            yield writer
        finally:
            writer.close()
        self._output = writer.as_output(content_type, filename)

    def discard_outputs(self) -> None:
        """Delete the spool files of streamed outputs (the runtime calls it once the attempt is over)."""
        for path in self._spools:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._spools.clear()


def call_job(function: JobFunction, ctx: JobContext) -> JobOutput:
    """Run a job function and return its output however the job gave it (output.resolve_output);
    progress still pending is written when the function returns."""
    try:
        returned = function(ctx)
    finally:
        ctx.flush_progress()
    return resolve_output(returned, ctx._output)


JobFunction = Callable[[JobContext], object]  # its output: see output.resolve_output


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


def builtin_job_types() -> list[str]:
    """The job types the scheduler itself declares (workers/jobs): what `create_tenant` grants
    when it names none. Examples (the examples app) and a team's own modules
    (SCHEDULER_JOB_MODULES) are granted by name."""
    return sorted(name for name, declared in JOBS.items() if declared.function.__module__.startswith(__package__ + "."))


def get_job(name: str) -> JobFunction:
    try:
        return JOBS[name].function
    except KeyError:
        raise PermanentJobError(f"no approved implementation for job type {name!r}") from None
