"""Next-instant cost of rules: microseconds per `next_after`, the call the scanner, the timers
and preview make for every instant. Shared by the cost benchmarks of rule kinds
(bench/rrule_cost.py, bench/calendar_cost.py); no database.

For each rule, two walks of `--calls` calls each, `--repeat` times (the median and the worst
repeat are printed): `chained` asks for the instant after the previous one (the scanner's
walk; past `wrap_year` it starts again), `scattered` asks after instants spread over
`years` from 2027 (a schedule read again after a while)."""

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schedules.recurrence import next_after  # noqa: E402

START = datetime(2027, 6, 1, tzinfo=timezone.utc)


def chained(rule, calls: int, wrap_year: int) -> float:
    after, started = START, time.perf_counter()
    for _ in range(calls):
        found = next_after(rule, after)
        after = found if found is not None and found.year < wrap_year else START
    return (time.perf_counter() - started) / calls * 1e6


def scattered(rule, calls: int, years: int, seed: int = 7) -> float:
    rng = random.Random(seed)
    afters = [datetime(2027, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(years * 365 * 86400))
              for _ in range(calls)]
    started = time.perf_counter()
    for after in afters:
        next_after(rule, after)
    return (time.perf_counter() - started) / calls * 1e6


def print_costs(rows, *, years: int, wrap_year: int = 10_000) -> None:
    """The table of `rows` ((name, rule) pairs), with `--calls` and `--repeat` read from the
    command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'rule':48} {'chained us':>16} {'scattered us':>16}   (median / worst of {args.repeat})")
    for name, rule in rows:
        walk = [chained(rule, args.calls, wrap_year) for _ in range(args.repeat)]
        spread = [scattered(rule, args.calls, years) for _ in range(args.repeat)]
        print(f"{name:48} {statistics.median(walk):8.1f} / {max(walk):5.1f} "
              f"{statistics.median(spread):8.1f} / {max(spread):5.1f}")
