import logging

from django.core.management.base import BaseCommand

from runs.loops import Stopper, run_forever, sweep_pass

log = logging.getLogger("scheduler.sweep")


class Command(BaseCommand):
    help = "Expire passed leases and re-queue their runs (polls every second; --once does one pass)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--interval", type=float, default=1.0)

    def handle(self, *args, once, interval, **options):
        def step():
            swept = sweep_pass()
            if swept:
                log.info("expired leases: %d", swept)
            return swept

        if once:
            self.stdout.write(f"sweep: expired={step()}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name="sweep")
