import logging

from django.core.management.base import BaseCommand

from runs.lifecycle import cleanup_pass
from runs.loops import Stopper, run_forever

log = logging.getLogger("scheduler.cleanup")


class Command(BaseCommand):
    help = (
        "Enforce retention in bounded batches: expired report objects and orphaned uploads, then "
        "run history past RUN_RETENTION_DAYS, then old idempotency keys "
        "(polls every 60 s; --once does one pass)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--interval", type=float, default=60.0)
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args, once, interval, batch_size, **options):
        def step():
            stats = cleanup_pass(batch_size=batch_size)
            if any(stats.as_dict().values()):
                log.info("cleanup: %s", stats)
            return stats

        if once:
            self.stdout.write(f"cleanup: {step()}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name="cleanup")
