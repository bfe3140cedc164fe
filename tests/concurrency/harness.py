"""Set-up shared by the authority's race tests.

Each simulated process (scanner, worker, sweeper, editor) is a thread with its own Django
connection, so every call is a real PostgreSQL session; ``race`` releases several calls
at one barrier. Time passes by moving a lease deadline or a schedule's ``next_run_at``
in the database, never by mocking a clock.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

from runs import authority
from runs.clock import authority_now
from runs.models import Attempt, Run, StoredObject
from schedules.models import Schedule
from schedules.services import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec

# One instant per make_due(): after the instant we set, this rule's next one is months away.
YEARLY = "0 0 1 1 *"
CALL_TIMEOUT = 60


def create_schedule(tenant, *, cron: str = YEARLY, name: str = "s", params: dict | None = None, **extra) -> Schedule:
    body = {
        "name": name,
        "jobType": "demo.sleep",
        "params": {"seconds": 0} if params is None else params,
        "recurrence": {"kind": "cron", "cron": cron},
        **extra,
    }
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    return schedule


def make_due(schedule: Schedule, *, ago: timedelta = timedelta(seconds=1)) -> datetime:
    """Time passes until the schedule's next instant: it becomes ``ago`` late. Returns the instant."""
    instant = authority_now() - ago
    Schedule.objects.filter(id=schedule.id).update(next_run_at=instant)
    return instant


def materialize_one(schedule: Schedule) -> Run:
    """Make one instant due, run the scanner, and return that instant's occurrence."""
    instant = make_due(schedule)
    authority.materialize_due()
    return Run.objects.get(schedule=schedule, scheduled_at=instant)


def expire_lease(run_id: str, *, seconds_ago: float = 1) -> None:
    """Time passes past the lease deadline (database time, as the authority compares it)."""
    past = authority_now() - timedelta(seconds=seconds_ago)
    Run.objects.filter(id=run_id).update(lease_expires_at=past)
    Attempt.objects.filter(run_id=run_id, state="running").update(lease_expires_at=past)


def set_lease_deadline(run_id: str, deadline: datetime) -> None:
    Run.objects.filter(id=run_id).update(lease_expires_at=deadline)
    Attempt.objects.filter(run_id=run_id, state="running").update(lease_expires_at=deadline)


def stage(run: Run, data: bytes) -> StoredObject:
    return authority.stage_result(
        run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, data=data, content_type="text/plain"
    )


def complete_success(run_id: str, attempt_id: str, fence: int, obj: StoredObject) -> Run:
    return authority.complete(
        run_id=run_id, attempt_id=attempt_id, fence=fence, outcome="succeeded",
        object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum,
    )


@dataclass
class Outcome:
    value: object = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Session:
    """One simulated process: a thread that owns one database connection for its lifetime."""

    def __init__(self, name: str):
        self.name = name
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, fn, *args, **kwargs):
        return self._executor.submit(fn, *args, **kwargs)

    def call(self, fn, *args, **kwargs):
        """Run ``fn`` on this session's connection and return its result (or raise its error)."""
        return self.submit(fn, *args, **kwargs).result(CALL_TIMEOUT)

    def close(self) -> None:
        # A lambda: the proxy must resolve to this thread's connection, not the caller's.
        self._executor.submit(lambda: connection.close()).result(CALL_TIMEOUT)
        self._executor.shutdown(wait=True)


class Sessions:
    """Factory fixture value: ``sessions("worker-a")``; all are closed at teardown."""

    def __init__(self):
        self._open: list[Session] = []

    def __call__(self, name: str) -> Session:
        session = Session(name)
        self._open.append(session)
        return session

    def close_all(self) -> None:
        for session in self._open:
            session.close()
        self._open.clear()


def race(*calls: tuple[Session, object], timeout: float = CALL_TIMEOUT) -> list[Outcome]:
    """Run each ``(session, fn)`` at the same moment (a barrier) and collect every outcome."""
    barrier = threading.Barrier(len(calls))

    def released(fn):
        def go():
            connection.ensure_connection()  # connect before the barrier so the start is even
            barrier.wait(timeout)
            return fn()

        return go

    futures = [session.submit(released(fn)) for session, fn in calls]
    outcomes = []
    for future in futures:
        try:
            outcomes.append(Outcome(value=future.result(timeout)))
        except Exception as error:  # noqa: BLE001 - the test asserts on the exact type
            outcomes.append(Outcome(error=error))
    return outcomes
