"""Simulated processes for the authority's race tests (the steps they race are in
tests/authority_steps.py).

Each simulated process (scanner, worker, sweeper, editor) is a thread with its own Django
connection, so every call is a real PostgreSQL session; ``race`` releases several calls
at one barrier.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection, transaction

CALL_TIMEOUT = 60


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

    @contextmanager
    def holding(self, lock):
        """Inside the block this session holds what ``lock()`` locks (or writes), in a
        transaction left open (another process mid-transaction); it commits when the block ends."""
        taken, release = threading.Event(), threading.Event()

        def hold():
            held = transaction.atomic()
            # Marked as Django's TestCase marks its own transaction: ``lock()`` may be a durable
            # service entry point, whose writes then stay uncommitted until the block ends.
            held._from_testcase = True
            with held:
                lock()
                taken.set()
                release.wait(CALL_TIMEOUT)

        held = self.submit(hold)
        while not taken.wait(0.05):
            if held.done():
                held.result()  # lock() failed: raise its error here
        try:
            yield
        finally:
            release.set()
            held.result(CALL_TIMEOUT)

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


@contextmanager
def lock_timeout(seconds: float):
    """This session's statements fail instead of waiting longer than ``seconds`` for a lock."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = '{int(seconds * 1000)}ms'")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
