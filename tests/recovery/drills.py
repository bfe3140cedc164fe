"""What every recovery drill shares besides its servers: watching transactions from the
server's side, checking a database with verify_integrity, and printing the figures."""

from __future__ import annotations

import json
import threading
import time

from tests.recovery.clusters import Cluster, verify_integrity


class TransactionWatch(threading.Thread):
    """Samples pg_stat_activity every ``interval`` seconds for the sessions of one process
    (PGAPPNAME): the longest transaction and the longest idle-in-transaction pause seen."""

    def __init__(self, cluster: Cluster, application: str, interval: float = 0.05):
        super().__init__(name=f"watch-{application}", daemon=True)
        self.cluster, self.application, self.interval = cluster, application, interval
        self.longest_transaction = self.longest_idle = 0.0
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.cluster.connect() as conn:
            while not self.stopping.wait(self.interval):
                transaction, idle = conn.execute(
                    "SELECT coalesce(max(extract(epoch FROM now() - xact_start)), 0),"
                    " coalesce(max(extract(epoch FROM now() - state_change))"
                    "   FILTER (WHERE state LIKE 'idle in transaction%%'), 0)"
                    " FROM pg_stat_activity WHERE application_name = %s", [self.application],
                ).fetchone()
                self.longest_transaction = max(self.longest_transaction, float(transaction))
                self.longest_idle = max(self.longest_idle, float(idle))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.join()


def integrity(url: str, env: dict) -> dict:
    """manage.py verify_integrity on ``url`` (object store as in ``env``): its report,
    asserting every invariant holds."""
    result = verify_integrity(url, env)
    assert result.returncode == 0, f"verify_integrity failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    return json.loads(result.stdout)


def figures(drill: str, **values) -> str:
    """One line of figures, printed (pytest -s shows it) and returned."""
    line = f"recovery[{drill}] " + " ".join(
        f"{key}={value:.1f}" if isinstance(value, float) else f"{key}={value}" for key, value in values.items()
    )
    print("\n" + line)
    return line


def elapsed(since: float) -> float:
    return time.monotonic() - since
