from runs.loops import LoopCommand
from runs.retention import cleanup_pass
from kernel.progress import progress


class Command(LoopCommand):
    help = (
        "Enforce retention in bounded batches: expired report objects and orphaned uploads, then "
        "run history past RUN_RETENTION_DAYS, then old idempotency keys "
        "(polls every 60 s; --once does one pass, with a progress bar on a terminal)."
    )
    name = "cleanup"
    default_interval = 60.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args, **options):
        self.once = options["once"]
        return super().handle(*args, **options)

    def step(self, *, batch_size, **options):
        if not self.once:
            return cleanup_pass(batch_size=batch_size)  # a pass a minute: its log line is enough
        # On stderr, so stdout keeps the pass's summary alone.
        with progress("cleanup: objects, runs and request keys removed") as advance:
            return cleanup_pass(batch_size=batch_size, advance=advance)
