"""Drill: the primary crashes mid-burst and its streaming standby (pg_basebackup -R) is
promoted. Every process names both servers in one DATABASE_URL with
target_session_attrs=read-write, and reconnects to whichever accepts writes.

With synchronous replication no acknowledged completion is lost. With asynchronous
replication whatever the standby had not received is lost (docs/operations.md lists it);
the drill measures it by reading the old primary afterwards, and shows the stale side
refused: attempts granted or completed only on the old primary cannot heartbeat or
complete on the new one.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from runs import authority
from runs.models import RunState
from kernel.clock import authority_now
from kernel.errors import NotFound, StaleFence
from tests.e2e.processes import wait_until
from tests.recovery.clusters import DATABASE, OWNER, Cluster, django_on, migrate
from tests.recovery.drills import elapsed, integrity
from tests.servers import free_port

pytestmark = pytest.mark.slow

BURST = 120
UNREPLICATED_SECONDS = 1.5  # asynchronous case: the standby stops receiving this long before the crash


@pytest.fixture
def replicated(clusters):
    """A primary with the scheduler database and a streaming standby; this process uses
    the two-host URL every child process gets."""
    primary = clusters("primary")
    primary.start()
    primary.create_database()
    migrate(primary.url())
    standby = primary.replica("standby")
    url = (f"postgresql://{OWNER}@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/{DATABASE}"
           "?target_session_attrs=read-write&connect_timeout=2")
    with django_on(url):
        yield primary, standby, url


class Acknowledged(threading.Thread):
    """Polls the primary for succeeded runs until it dies. A commit becomes visible to other
    sessions only after the synchronous standby confirmed it, and is acknowledged to its
    worker after that: the last poll holds every completion acknowledged before it."""

    def __init__(self, primary: Cluster):
        super().__init__(name="acknowledged", daemon=True)
        self.primary, self.completions = primary, {}

    def run(self) -> None:
        try:
            with self.primary.connect() as conn:
                while True:
                    rows = conn.execute("SELECT id, accepted_attempt_id FROM runs_run WHERE state = 'succeeded'")
                    self.completions = dict(rows.fetchall())
                    time.sleep(0.05)
        except psycopg.OperationalError:
            return  # the crash


@pytest.mark.parametrize("synchronous", [True, False], ids=["synchronous", "asynchronous"])
def test_drill__primary_crashes_mid_burst__standby_promoted_and_fencing_holds(replicated, chaos, synchronous):
    primary, standby, url = replicated
    if synchronous:
        primary.query("ALTER SYSTEM SET synchronous_standby_names = 'standby'", database="postgres")
        primary.query("SELECT pg_reload_conf()", database="postgres")
        wait_until(lambda: primary.query("SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'",
                                         database="postgres"), timeout=10, message="synchronous replication")
    load = chaos.burst(BURST)
    chaos.processes.env["DATABASE_URL"] = url
    chaos.start(workers=2, concurrency=4)
    acknowledged = Acknowledged(primary)
    acknowledged.start()
    chaos.wait_terminal(load, BURST // 3)
    if not synchronous:
        stop_streaming(primary, standby)
        time.sleep(UNREPLICATED_SECONDS)  # the burst goes on where only the primary sees it

    failed_at = time.monotonic()
    primary.stop("immediate")
    standby.promote()
    acknowledged.join(10)
    connection.close()  # this process reconnects too: to whichever server accepts writes
    promoted = authority_now()
    wait_until(lambda: load.runs().filter(state=RunState.SUCCEEDED, finished_at__gt=promoted).exists(),
               timeout=60, message="a completion on the promoted standby")
    reconnected = elapsed(failed_at)
    chaos.settle(load)
    report = chaos.check(load)
    new = accepted(standby)

    lost = {run: attempt for run, attempt in acknowledged.completions.items() if new.get(run) != attempt}
    primary.start(port=free_port())  # the old primary, on a port no process knows: what did only it commit?
    only_old = committed_only_on(primary, standby)
    refused = refuse_stale_side(primary, only_old)
    integrity(url, chaos.processes.env)
    if synchronous:
        assert not lost, f"acknowledged completions lost in a synchronous failover: {list(lost)[:5]}"
    else:  # the unreplicated seconds held claims and completions; none of them counts on the new primary
        assert only_old["completions"] and refused
    assert refused == len(only_old["attempts"]) + len(only_old["completions"])
    chaos.figures(
        f"recovery: primary crash, {'synchronous' if synchronous else 'asynchronous'} standby promoted", report,
        faults=1, reconnect_s=round(reconnected, 1), acknowledged=len(acknowledged.completions),
        acknowledged_lost=len(lost), old_only_attempts=len(only_old["attempts"]),
        old_only_completions=len(only_old["completions"]), old_only_outbox=len(only_old["outbox"]),
        stale_refused=refused,
    )


def stop_streaming(primary: Cluster, standby: Cluster) -> None:
    """The standby stops receiving WAL (a network partition, a lagging link)."""
    standby.query("ALTER SYSTEM SET primary_conninfo = ''", database="postgres")
    standby.query("SELECT pg_reload_conf()", database="postgres")
    wait_until(lambda: not primary.query("SELECT 1 FROM pg_stat_replication", database="postgres"),
               timeout=10, message="the standby to stop streaming")


def accepted(server: Cluster) -> dict[str, str]:
    return dict(server.query("SELECT id, accepted_attempt_id FROM runs_run WHERE state = 'succeeded'"))


def committed_only_on(old: Cluster, new: Cluster) -> dict[str, dict]:
    """What the old primary committed that the promoted standby never received: attempts
    (claims), completions, outbox rows (dispatch intents and their publication)."""
    def rows(server, sql):
        return {row[0]: row[1:] for row in server.query(sql)}

    attempts = "SELECT id, run_id, fence FROM runs_attempt"
    outbox = "SELECT action_key, published_at FROM runs_outbox"
    old_attempts, new_attempts = rows(old, attempts), rows(new, attempts)
    old_completions, new_completions = accepted(old), accepted(new)
    return {
        "attempts": {a: v for a, v in old_attempts.items() if a not in new_attempts},
        "completions": {r: a for r, a in old_completions.items() if new_completions.get(r) != a},
        "outbox": {k: v for k, v in rows(old, outbox).items() if k not in rows(new, outbox)},
    }


def refuse_stale_side(old: Cluster, only_old: dict[str, dict]) -> int:
    """Replay, against the new primary, what workers of the old one still hold: a heartbeat
    for every attempt granted only there, a completion for every completion accepted only
    there. Each must be refused; returns how many were."""
    fences = dict(old.query("SELECT id, fence FROM runs_attempt"))
    calls = [(authority.heartbeat, run_id, attempt_id, fence)
             for attempt_id, (run_id, fence) in only_old["attempts"].items()]
    calls += [(authority.complete, run_id, attempt_id, fences[attempt_id])
              for run_id, attempt_id in only_old["completions"].items()]
    refused = 0
    for call, run_id, attempt_id, fence in calls:
        extra = {"outcome": "failed", "error": "from the old primary"} if call is authority.complete else {}
        with pytest.raises((NotFound, StaleFence)):
            call(run_id=run_id, attempt_id=attempt_id, fence=fence, **extra)
        refused += 1
    return refused
