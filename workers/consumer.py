"""The Celery worker's consumer: back on a restarted broker within a fraction of a second,
and alive after losing it. On losing it, the worker's free processes start claiming queued
runs from the authority at once (workers.idle_claims).

Celery's consumer retries a lost broker connection after 2 s, then 4 s, 6 s and so on up to
30 s (kombu's ``ensure_connection`` defaults; Celery has no setting for them). A broker that
restarts without persistence loses every hint it held, and the relay republishes them as soon
as it sees the new incarnation (runs.relay.republish_after_broker_restart); a worker still
waiting out its 2 s then leaves every occurrence due meanwhile unclaimed, and under overlap
``buffer_one`` a schedule whose run is still queued at its next instant skips that instant.
This consumer retries after 0.1 s, then every 0.3 s, 0.5 s, ... at most ``RECONNECT_MAX_SECONDS``:
one connection attempt a second at worst while the broker is down. Enabled by
``CELERY_WORKER_CONSUMER``.

It also keeps the worker alive through the loss itself (Celery 5.7, kombu 5.7's Redis
transport). Celery's cleanup first ``collect()``s the broken connection, then closes it.
When the loss interrupts a pending BRPOP (the consumer waits in one whenever a pool process
is free), the Redis channel's ``close()`` re-reads that BRPOP, gets the connection error
again and returns before marking itself closed; ``collect()`` ignores the error and drops
the transport. The second close then closes the channel again: it restores the unacknowledged
messages (hint tasks running under ``acks_late``) through a new Redis pool, whose parameters
come from the dropped transport's client, ``None``:
``AttributeError: 'NoneType' object has no attribute 'hostname'``, which ``ignore_errors``
does not ignore, and the worker stops ("Unrecoverable error"). The same bug in kombu 3,
reached through gossip's channel: celery/kombu#582. Here the connection forgets its default
channel once collected, so its close has nothing left to close twice. The unacknowledged
hints are not restored then: the broker is unreachable anyway (restarted without
persistence, they are gone with it; otherwise Redis redelivers them after the visibility
timeout), hints are only hints, and the relay republishes the lost ones while idle
processes claim from the authority (workers.idle_claims).
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

    def on_connection_error_after_connected(self, exc):
        from workers import idle_claims

        idle_claims.lost_broker()  # free processes claim from the authority at once
        if self.connection is not None:
            self.connection.collect = partial(_collect_and_forget_channel, self.connection, self.connection.collect)
        super().on_connection_error_after_connected(exc)


def _collect_and_forget_channel(connection, collect, *args, **kwargs):
    """``connection.collect()``, after which the connection holds no channel to close again."""
    try:
        return collect(*args, **kwargs)
    finally:
        connection._default_channel = None
