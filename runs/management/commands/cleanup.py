from runs.retention import cleanup_pass
from runs.loops import LoopCommand


class Command(LoopCommand):
    help = (
        "Enforce retention in bounded batches: expired report objects and orphaned uploads, then "
        "run history past RUN_RETENTION_DAYS, then old idempotency keys "
        "(polls every 60 s; --once does one pass)."
    )
    name = "cleanup"
    default_interval = 60.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--batch-size", type=int, default=None)

    def step(self, *, batch_size, **options):
        return cleanup_pass(batch_size=batch_size)
