import logging

from django.core.management.base import BaseCommand

from runs.loops import Stopper, run_forever
from runs.relay import republish_lost_hints
from workers.dispatch import relay_all

log = logging.getLogger("scheduler.relay")


class Command(BaseCommand):
    help = "Publish committed dispatch intents to the Celery queues (loops; --once does one pass)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--interval", type=float, default=0.2)

    def handle(self, *args, once, interval, **options):
        def step():
            republished = republish_lost_hints()
            if republished:
                log.warning("republishing %d hints that look lost", republished)
            published = relay_all()
            if published:
                log.info("published %d hints", published)
            return published

        if once:
            self.stdout.write(f"relay: published={step()}")
            return
        run_forever(step, interval=interval, stopper=Stopper(), name="relay")
