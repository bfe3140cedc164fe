"""Relay throughput: N committed dispatch intents published to Redis by one relay process.

    .venv/bin/python bench/relay_throughput.py [--runs 20000] [--repeat 3]

Materializes N runs due now (N outbox rows), then times ``relay_all()`` (what
`manage.py relay` does every pass) until every row is published, and checks Redis holds
N messages. Prints hints/s per repeat and the median.
"""

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import django_on, median, wave  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/13"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["REDIS_URL"] = REDIS_URL
    rates = []
    for _ in range(args.repeat):
        django_on("scheduler_relay_bench")
        import redis

        from runs import authority
        from runs.models import Outbox
        from kernel.clock import authority_now
        from workers.hint_publisher import relay_all

        broker = redis.Redis.from_url(REDIS_URL)
        broker.flushdb()
        wave(args.runs, authority_now() - timedelta(seconds=1), name="relay")
        while authority.materialize_due().schedules:
            pass
        assert Outbox.objects.filter(published_at__isnull=True).count() == args.runs

        started = time.perf_counter()
        published = relay_all()
        elapsed = time.perf_counter() - started
        assert published == args.runs and broker.llen("short") == args.runs, (published, broker.llen("short"))
        rates.append(args.runs / elapsed)
        print(f"  {args.runs} hints in {elapsed:.2f}s: {args.runs / elapsed:,.0f} hints/s")
    print(f"relay, one process, {args.runs} rows: median {median(rates):,.0f} hints/s")


if __name__ == "__main__":
    main()
