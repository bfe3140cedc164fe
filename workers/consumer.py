"""The Celery worker's consumer: back on a restarted broker within a fraction of a second.

Celery's consumer retries a lost broker connection after 2 s, then 4 s, 6 s and so on up to
30 s (kombu's ``ensure_connection`` defaults; Celery has no setting for them). A broker that
restarts without persistence loses every hint it held, and the relay republishes them as soon
as it sees the new incarnation (runs.relay.republish_after_broker_restart); a worker still
waiting out its 2 s then leaves every occurrence due meanwhile unclaimed, and under overlap
``buffer_one`` a schedule whose run is still queued at its next instant skips that instant.
This consumer retries after 0.1 s, then every 0.3 s, 0.5 s, ... at most ``RECONNECT_MAX_SECONDS``:
one connection attempt a second at worst while the broker is down. Enabled by
``CELERY_WORKER_CONSUMER``.
"""

from functools import partial

from celery.worker.consumer import Consumer as CeleryConsumer

RECONNECT_FIRST_SECONDS, RECONNECT_STEP_SECONDS, RECONNECT_MAX_SECONDS = 0.1, 0.2, 1.0


class Consumer(CeleryConsumer):
    def ensure_connected(self, conn):
        conn.ensure_connection = partial(
            conn.ensure_connection, interval_start=RECONNECT_FIRST_SECONDS, interval_step=RECONNECT_STEP_SECONDS,
            interval_max=RECONNECT_MAX_SECONDS,
        )
        return super().ensure_connected(conn)
