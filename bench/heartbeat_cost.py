"""Heartbeat cost: N attempts held by P worker processes, each process with its own lease
keeper (one heartbeat transaction per interval for all of its attempts).

    .venv/bin/python bench/heartbeat_cost.py [--attempts 1000] [--processes 8] [--beats 5]

Each simulated process is a thread with its own PostgreSQL connection and LeaseKeeper.
Prints the transactions and statements each heartbeat round sends (every statement each
keeper's connection executed) and the median time of one process's beat.
"""

import argparse
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import django_on, median, wave  # noqa: E402



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--beats", type=int, default=5)
    args = parser.parse_args()
    django_on("scheduler_heartbeat_bench")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs import authority
    from kernel.clock import authority_now
    from workers.jobs.framework import JobControl
    from workers.leases import LeaseKeeper

    wave(args.attempts, authority_now() - timedelta(seconds=1), name="beats")
    while authority.materialize_due().schedules:
        pass
    runs = []
    while len(runs) < args.attempts:
        runs += authority.claim_many(n=500, worker_label="bench", lease_seconds=300)
    keepers = [LeaseKeeper() for _ in range(args.processes)]
    for i, run in enumerate(runs):
        keepers[i % args.processes].hold(run.current_attempt_id, run.fence, lease_seconds=300, interval=3600,
                                         control=JobControl(), claimed_at=time.monotonic())
    durations, transactions, statements = [], [], []
    rounds = [threading.Barrier(args.processes + 1) for _ in range(2 * args.beats + 1)]

    def process(keeper):  # a worker process's keeper thread: its own connection, kept
        keeper.beat()  # connection set-up happens here, before the first measured round
        rounds[0].wait()
        for i in range(args.beats):
            rounds[2 * i + 1].wait()
            started = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                keeper.beat()
            durations.append(time.perf_counter() - started)
            sql = [q["sql"] for q in queries.captured_queries]
            transactions.append(sql.count("COMMIT"))
            statements.append(len([q for q in sql if q not in ("BEGIN", "COMMIT")]))
            rounds[2 * i + 2].wait()
        connection.close()

    threads = [threading.Thread(target=process, args=(k,)) for k in keepers]
    for t in threads:
        t.start()
    rounds[0].wait()
    for i in range(args.beats):
        rounds[2 * i + 1].wait()
        rounds[2 * i + 2].wait()
    for t in threads:
        t.join()
    print(f"{args.attempts} attempts held by {args.processes} processes: "
          f"{sum(transactions) / args.beats:.0f} transactions and {sum(statements) / args.beats:.0f} statements "
          f"per heartbeat round ({args.beats} rounds); "
          f"one process's beat: median {median(durations) * 1000:.1f} ms for "
          f"{args.attempts // args.processes} attempts")


if __name__ == "__main__":
    main()
