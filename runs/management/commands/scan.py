import logging

from django.core.management.base import BaseCommand

from runs.loops import Stopper, run_forever, scan_pass

log = logging.getLogger("scheduler.scan")


def parse_buckets(text: str | None):
    """"0-15,32" -> [0..15, 32]; None means every bucket."""
    if not text:
        return None
    buckets = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        buckets.extend(range(int(low), int(high or low) + 1))
    return buckets


class Command(BaseCommand):
    help = "Materialize due occurrences (polls every second; --once does one pass)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--interval", type=float, default=1.0)
        parser.add_argument("--buckets", help="due buckets to scan, e.g. 0-31 (default: all)")
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args, once, interval, buckets, batch_size, **options):
        buckets = parse_buckets(buckets)

        def step():
            stats = scan_pass(buckets=buckets, batch_size=batch_size)
            if stats.schedules:
                log.info("materialized schedules=%d queued=%d pending=%d skipped=%d",
                         stats.schedules, stats.queued, stats.pending, stats.skipped)
            return stats

        if once:
            stats = step()
            self.stdout.write(f"scan: schedules={stats.schedules} queued={stats.queued} "
                              f"pending={stats.pending} skipped={stats.skipped}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name="scan")
