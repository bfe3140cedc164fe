"""A relay's wait ends at the commit of a materialization that wrote dispatch intents
(NOTIFY on the outbox channel, LISTEN on the loop's connection), and only then."""

import threading
import time

import pytest
from django.db import connection

from runs import authority
from runs.authority.statements.outbox import OUTBOX_CHANNEL
from runs.loops import Stopper, Wakeup
from tests.authority_steps import create_schedule, make_due

pytestmark = pytest.mark.django_db(transaction=True)


def materialize_later(seconds: float) -> threading.Thread:
    def work():
        time.sleep(seconds)
        try:
            authority.materialize_due()
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def timed_wait(wakeup: Wakeup, seconds: float) -> float:
    started = time.monotonic()
    wakeup.wait(seconds)
    return time.monotonic() - started


def test_wakeup__a_materialization_commits__the_wait_ends_then(tenant):
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    wakeup = Wakeup(OUTBOX_CHANNEL, Stopper(install_signals=False))
    connection.ensure_connection()
    assert timed_wait(wakeup, 0.3) >= 0.29  # nothing committed: the wait lasts

    make_due(create_schedule(tenant))
    thread = materialize_later(0.3)
    waited = timed_wait(wakeup, 10)
    thread.join()
    assert 0.25 <= waited < 3, waited


def test_wakeup__nothing_to_dispatch__no_wake(tenant):
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    wakeup = Wakeup(OUTBOX_CHANNEL, Stopper(install_signals=False))
    connection.ensure_connection()
    timed_wait(wakeup, 0.01)  # listening from here
    thread = materialize_later(0.1)  # nothing due: no intents, no notification
    assert timed_wait(wakeup, 1.0) >= 0.95
    thread.join()
