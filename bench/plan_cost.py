"""What planning costs the group commit, and what a prepared statement's generic plan would
save: the completion read (statements.completions.completions_lock, the text the code sends)
of a batch of finished runs, executed many times on one connection each way, timing the
server's CPU (its backend's /proc counters: the database runs on this machine).

    .venv/bin/python bench/plan_cost.py --database scheduler_burst [--batch 28] [--calls 2000]

``--database`` holds runs finished with a result (what `bench/burst.py --keep` leaves). The
ways: bound client-side (as the code sends it), bound server-side and prepared with a plan made
for each call's values (``plan_cache_mode = force_custom_plan``), and prepared with one generic
plan (``force_generic_plan``); then the planning time EXPLAIN reports. Nothing is written: the
read's row locks end with each call's transaction.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import SERVER, django_on  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="scheduler_burst")
    parser.add_argument("--batch", type=int, default=28, help="runs per call (a burst's claims take ~28)")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    django_on(args.database, keep=True)

    import psycopg
    from django.db import connection, transaction

    from runs.authority.statements.completions import completions_lock
    from runs.models import Run, StoredObject
    from tests.plans import statements

    finished = list(Run.objects.filter(state="succeeded").values_list("id", "accepted_attempt_id")[:args.batch])
    keys = dict(StoredObject.objects.filter(run_id__in=[r for r, _ in finished], state="referenced")
                .values_list("run_id", "key"))
    if len(finished) < args.batch or len(keys) < args.batch:
        sys.exit(f"{args.database} holds fewer than {args.batch} runs finished with a result")
    with transaction.atomic():
        [(sql, params, _)] = statements(lambda: completions_lock(
            [r for r, _ in finished], [a for _, a in finished], [keys[r] for r, _ in finished]))
        transaction.set_rollback(True)
    connection.close()

    conn = psycopg.connect(f"{SERVER}/{args.database}", autocommit=True, prepare_threshold=5)
    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    ticks = os.sysconf("SC_CLK_TCK")

    def server_cpu() -> float:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    def timed(label: str, cursor, *, prepare: bool, mode: str) -> None:
        conn.execute(f"SET plan_cache_mode = {mode}")
        for _ in range(20):  # warm: the catalog caches, and the plan kept after five executions
            cursor.execute(sql, params, prepare=prepare).fetchall()
        cpu, started = server_cpu(), time.perf_counter()
        for _ in range(args.calls):
            cursor.execute(sql, params, prepare=prepare).fetchall()
        per_call = 1e6 / args.calls
        print(f"  {label:38} server CPU {(server_cpu() - cpu) * per_call:7.0f} µs per call,"
              f" {(server_cpu() - cpu) * per_call / args.batch:5.1f} per run; wall {(time.perf_counter() - started) * per_call:7.0f} µs")

    print(f"the completion read of {args.batch} runs, {args.calls:,} calls each way:")
    timed("bound client-side (as sent)", psycopg.ClientCursor(conn), prepare=False, mode="auto")
    timed("prepared, planned at every call", conn.cursor(), prepare=True, mode="force_custom_plan")
    timed("prepared, one generic plan", conn.cursor(), prepare=True, mode="force_generic_plan")
    conn.execute("RESET plan_cache_mode")
    client = psycopg.ClientCursor(conn)
    planning = []
    for _ in range(200):
        explained = client.execute(f"EXPLAIN (SUMMARY) {sql}", params).fetchall()
        planning.append(float(next(row[0] for row in explained if row[0].startswith("Planning Time")).split()[2]))
    print(f"  planning time (EXPLAIN, median of the last 180 of 200): {statistics.median(planning[20:]):.3f} ms")


if __name__ == "__main__":
    main()
