"""Next-instant cost per cron rule, the v1.2 syntax included (L, W, #, ?, seconds, H, dialects).

    .venv/bin/python bench/recurrence_cost.py [--calls 20000] [--zone America/New_York]

Pure computation, no database: each rule's ``next_after`` from ``--calls`` starting instants
spread over 2026-2035 (random, fixed seed), timed one call at a time; prints the median and
p99 per rule in microseconds. The compiled rule is cached as the scanner's is (one compile
per rule text, dialect and hash key); the first call's compile is reported apart.
Target (the time-language work): median <= 20 us for the new syntax.
"""

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schedules.recurrence import next_after, parse_rule  # noqa: E402
from schedules.recurrence.cron import compile_cron  # noqa: E402

RULES = [
    ("0 9 * * 1-5", "vixie"),  # before v1.2: the baseline
    ("*/15 * * * *", "vixie"),
    ("0 0 */10 * 5", "vixie"),
    ("0 0 13 * 5", "or"),
    ("0 9 1-7 * 1", "and"),
    ("0 17 L * *", "vixie"),
    ("0 17 L-2 * *", "vixie"),
    ("0 9 15W * *", "vixie"),
    ("0 17 LW * *", "vixie"),
    ("0 17 ? * 5L", "vixie"),
    ("0 9 ? * 2#3", "vixie"),
    ("0 0 * 2 5#5", "vixie"),  # a fifth Friday of February: years apart
    ("30 0 9 * * 1-5", "vixie"),
    ("*/10 * * * * *", "vixie"),
    ("H H * * *", "vixie"),
    ("H(0-29)/10 H(8-17) * * 1-5", "vixie"),
    ("@monthly", "vixie"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--zone", default="America/New_York")
    args = parser.parse_args()
    generator = random.Random(34)
    span = int(timedelta(days=3650).total_seconds())
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    starts = [base + timedelta(seconds=generator.randrange(span)) for _ in range(args.calls)]
    print(f"next_after, {args.calls} calls per rule, zone {args.zone}, Python {sys.version.split()[0]}")
    print(f"{'rule':<30} {'dialect':<7} {'compile us':>10} {'median us':>10} {'p99 us':>8}")
    medians = []
    for cron, dialect in RULES:
        compile_cron.cache_clear()
        rule = parse_rule({"kind": "cron", "cron": cron, "timezone": args.zone, "dialect": dialect,
                           "hashKey": "sch_bench"})
        compile_cron.cache_clear()
        began = time.perf_counter()
        next_after(rule, starts[0])
        first = (time.perf_counter() - began) * 1e6
        timings = []
        for start in starts:
            began = time.perf_counter()
            next_after(rule, start)
            timings.append((time.perf_counter() - began) * 1e6)
        timings.sort()
        median = statistics.median(timings)
        medians.append(median)
        print(f"{cron:<30} {dialect:<7} {first:>10.0f} {median:>10.1f} {timings[int(len(timings) * 0.99)]:>8.1f}")
    print(f"worst median {max(medians):.1f} us (target <= 20 us)")


if __name__ == "__main__":
    main()
