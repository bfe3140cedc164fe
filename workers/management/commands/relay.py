import logging
import time

from runs.authority.statements.outbox import OUTBOX_CHANNEL
from runs.loops import LoopCommand
from workers.hint_publisher import republish_and_relay

log = logging.getLogger("scheduler.relay")

WARN_EVERY_SECONDS = 10.0  # the broker away: one warning this often, not one per step


class Command(LoopCommand):
    help = "Publish committed dispatch intents to the Celery queues (loops; --once does one pass)."
    name = "relay"
    default_interval = 0.2
    listen = OUTBOX_CHANNEL  # materialization wakes the relay at its commit
    _warned_at = float("-inf")

    def step(self, **options):
        """One relay step. The broker away (a restart, a network cut) is not the relay's end:
        nothing is marked published that Redis did not take, so the next step, once the
        broker is back, publishes it (and republishes what the restart lost)."""
        try:
            return republish_and_relay()
        except broker_errors() as exc:
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_SECONDS:
                self._warned_at = now
                log.warning("relay: the broker is unreachable, trying again every step: %s", exc)
            return 0


def broker_errors() -> tuple[type[BaseException], ...]:
    """What the broker's transport raises when it cannot be reached, and kombu's wrapper."""
    from kombu.exceptions import OperationalError

    from scheduler_project.celery import app

    connection = app.connection_for_write()  # not connected: only its transport's error types
    return (OperationalError, *connection.connection_errors)
