from runs.authority.sql import OUTBOX_CHANNEL
from runs.loops import LoopCommand
from workers.dispatch import republish_and_relay


class Command(LoopCommand):
    help = "Publish committed dispatch intents to the Celery queues (loops; --once does one pass)."
    name = "relay"
    default_interval = 0.2
    listen = OUTBOX_CHANNEL  # materialization wakes the relay at its commit

    def step(self, **options):
        return republish_and_relay()
