import logging

from runs.loops import LoopCommand
from runs.relay import republish_lost_hints
from workers.dispatch import queue_depth, relay_all

log = logging.getLogger("scheduler.relay")


class Command(LoopCommand):
    help = "Publish committed dispatch intents to the Celery queues (loops; --once does one pass)."
    name = "relay"
    default_interval = 0.2

    def step(self, **options):
        republished = republish_lost_hints(queue_depth)
        if republished:
            log.warning("republishing %d hints that look lost", republished)
        return relay_all()
