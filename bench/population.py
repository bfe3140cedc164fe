"""Population bench: does a wave's lateness, and the scanner's idle cost, depend on how many
schedules exist?

    .venv/bin/python bench/population.py [--populations 10000 1000000] [--wave 1000]
                                         [--idle-seconds 30] [--repeat 1]

For each population P: P cron schedules, of which ``--wave`` are due at one minute M and
the others at instants spread over the 30 days after tomorrow (so nothing else is due
while it runs). One ``manage.py scan`` and one ``manage.py relay`` start at least
``--idle-seconds`` + 105 s before M. While nothing is within their timer horizon (the minute after start-up) the
database work of the idle processes is counted from ``pg_stat_database`` (blocks read or
hit in shared buffers, rows returned or fetched, transactions) over ``--idle-seconds``;
then the wave's lateness is measured as in bench/peer_beat.py (first arrival of each run's
hint at Redis minus M).

Same database and Redis as bench/peer_beat.py ($PEER_DATABASE, $PEER_REDIS_URL), emptied
before each population; the processes run with RELAY_REPUBLISH_AFTER_SECONDS=3600 unless
the environment says otherwise (nothing claims the runs).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_beat  # noqa: E402
from _setup import clone_schedule, median, percentile  # noqa: E402

STATS = ("blks_hit", "blks_read", "tup_returned", "tup_fetched", "xact_commit")


def populate(total: int) -> None:
    """``total`` schedules like peer_beat's, due at instants spread over the 30 days after
    tomorrow; then VACUUM ANALYZE, as a database that grew to this size would be."""
    from django.db import connection

    from schedules.models import Schedule

    peer_beat.create_our_schedules(1, peer_beat.next_due(600))  # its rule's next instant
    clone_schedule(Schedule.objects.get(), total - 1, peer_beat.next_due(86_400))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE schedules_schedule SET next_run_at = next_run_at + random() * interval '30 days'")
    connection.close()
    with peer_beat_connection() as conn:
        conn.execute("VACUUM ANALYZE")


def make_wave(size: int, due) -> None:
    """``size`` of the schedules become due at ``due`` (their rule aside: an instant is
    materialized as its row says)."""
    with peer_beat_connection() as conn:
        conn.execute("UPDATE schedules_schedule SET next_run_at = %s WHERE id IN"
                     " (SELECT id FROM schedules_schedule ORDER BY random() LIMIT %s)", [due, size])


def peer_beat_connection():
    import psycopg

    return psycopg.connect(peer_beat.DATABASE_URL, autocommit=True)


def database_stats() -> dict[str, int]:
    with peer_beat_connection() as conn:
        row = conn.execute(f"SELECT {', '.join(STATS)} FROM pg_stat_database WHERE datname = %s",
                           [peer_beat.DATABASE]).fetchone()
    return dict(zip(STATS, row))


def measure(total: int, args, var_dir: Path) -> dict:
    peer_beat.reset()
    started = time.monotonic()
    populate(total)
    setup_seconds = time.monotonic() - started
    # Start-up, the idle window, then the horizon before the wave's minute.
    due = peer_beat.next_due(15 + args.idle_seconds + settings_horizon() + 30)
    make_wave(args.wave, due)
    log_dir = var_dir / f"population-{total}"
    log_dir.mkdir(parents=True, exist_ok=True)
    tap = peer_beat.BrokerTap(peer_beat.OUR_QUEUE)
    tap.start()
    procs = peer_beat.start_processes("ours", 1, dict(os.environ), log_dir)
    try:
        time.sleep(15)  # start-up: migrations checked, directory joined, first loads done
        idle_until = due.timestamp() - settings_horizon() - 15
        if time.time() + args.idle_seconds > idle_until:
            raise SystemExit(f"start-up took too long for an idle window before {due:%H:%M:%S}")
        before, began = database_stats(), time.time()
        time.sleep(args.idle_seconds)
        after, idle = database_stats(), time.time() - began
        while time.time() < due.timestamp() + args.cap and tap.count("ours") < args.wave:
            if any(p.poll() is not None for p in procs):
                raise SystemExit(f"a scheduler process exited early; see {log_dir}")
            time.sleep(0.1)
    finally:
        peer_beat.stop_processes(procs)
        tap.stop.set()
        tap.join()
    lateness = sorted(t - due.timestamp() for t, raw in tap.arrivals
                      for _ in range(peer_beat.message_key(raw, "ours")[1]))
    lateness += [float("inf")] * (args.wave - len(lateness))
    per_second = {name: (after[name] - before[name]) / idle for name in STATS}
    return {"population": total, "setup_seconds": setup_seconds, "first": lateness[0],
            "p50": percentile(lateness, 50), "p99": percentile(lateness, 99), "last": lateness[-1],
            "idle": per_second}


def settings_horizon() -> float:
    from django.conf import settings

    return settings.SCAN_TIMER_HORIZON_SECONDS


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--populations", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--wave", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--cap", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("RELAY_REPUBLISH_AFTER_SECONDS", "3600")
    var_dir = Path(tempfile.mkdtemp(prefix="population-"))
    peer_beat.configure(var_dir)
    print(f"population bench: {args.populations} wave={args.wave} cpus={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.2f}", flush=True)
    results = []
    for total in args.populations:
        for _ in range(args.repeat):
            r = measure(total, args, var_dir)
            results.append(r)
            idle = r["idle"]
            print(f"  P={total:>9,}  set-up {r['setup_seconds']:.0f}s  wave of {args.wave:,}: first {r['first']:.3f}s "
                  f"p50 {r['p50']:.3f}s p99 {r['p99']:.3f}s last {r['last']:.3f}s | idle per second: "
                  f"blocks {idle['blks_hit'] + idle['blks_read']:.0f} (read {idle['blks_read']:.1f}), "
                  f"rows {idle['tup_returned'] + idle['tup_fetched']:.0f}, transactions {idle['xact_commit']:.1f}",
                  flush=True)
    print()
    print("| population | wave p50 | wave p99 | wave last | idle blocks/s | idle rows/s | idle transactions/s | runs |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for total in args.populations:
        group = [r for r in results if r["population"] == total]

        def mid(key, group=group):
            return median([r[key] for r in group])

        def idle_mid(*names, group=group):
            return median([sum(r["idle"][n] for n in names) for r in group])

        print(f"| {total:,} | {mid('p50'):.3f} s | {mid('p99'):.3f} s | {mid('last'):.3f} s | "
              f"{idle_mid('blks_hit', 'blks_read'):.0f} | {idle_mid('tup_returned', 'tup_fetched'):.0f} | "
              f"{idle_mid('xact_commit'):.1f} | {len(group)} |")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
