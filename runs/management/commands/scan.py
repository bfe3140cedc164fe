from runs.loops import LoopCommand, scan_pass


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
    help = "Materialize due occurrences (polls every second; --once does one pass)."
    name = "scan"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--buckets", type=parse_buckets, help="due buckets to scan, e.g. 0-31 (default: all)")
        parser.add_argument("--batch-size", type=int, default=None)

    def step(self, *, buckets, batch_size, **options):
        return scan_pass(buckets=buckets, batch_size=batch_size)
