from runs.loops import LoopCommand, scan_pass
from runs.scanner import ScanLoop
from kernel.startup import require_secrets


def parse_buckets(text: str | None):
    """"0-15,32" -> [0..15, 32], each once; None means every bucket."""
    if not text:
        return None
    buckets = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        buckets.extend(range(int(low), int(high or low) + 1))
    return sorted(set(buckets))


class Command(LoopCommand):
    help = (
        "Materialize due occurrences. Joins the scanner directory and serves the due buckets its "
        "lease holds (--buckets pins them instead), firing the next minute's instants from "
        "in-memory timers and polling the due index every --interval seconds; --once does one "
        "pass over every bucket (or the pinned ones)."
    )
    name = "scan"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--buckets", type=parse_buckets, help="pin the due buckets to scan, e.g. 0-31")
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--no-timers", action="store_true", help="poll only (no timer horizon)")

    def step(self, *, buckets, batch_size, **options):
        return scan_pass(buckets=buckets, batch_size=batch_size)

    def handle(self, *args, once, interval, buckets, batch_size, no_timers, **options):
        if once:
            return super().handle(*args, once=once, interval=interval, buckets=buckets, batch_size=batch_size)
        require_secrets()
        ScanLoop(buckets=buckets, interval=interval, batch_size=batch_size, timers=not no_timers).run()
