"""The outbox relay's publisher (Redis mode): dispatch hints sent to the broker as Celery
task messages, lost hints republished, the broker's incarnation watched. The relay's
database half (which rows to publish, marking them) is runs/relay.py."""

import logging
from runs.relay import relay_pass, republish_after_broker_restart, republish_lost_hints
from workers import batching

relay_log = logging.getLogger("scheduler.relay")


# workers.tasks.execute, sent by name so that publishing never imports the task module.
EXECUTE_TASK = "scheduler.execute"
PERSISTENT = 2  # AMQP delivery mode, Celery's default


def publish_hints(hints, producer) -> None:
    """Send the hints of one relay batch in one pipelined Redis round trip; returns once
    Redis accepted them all, raises otherwise. Hints of one resource class travel in
    messages worth up to ``CLAIM_BATCH`` claims each (workers.batching): each message names
    its first run and how many claims it is worth.

    Each message is Celery's own protocol-2 task message for ``scheduler.execute``, built
    once per resource class by ``as_task_v2`` and copied per message with its own task id
    and arguments, the only parts that differ. ``send_task`` rebuilds the whole message, its
    route and its argument repr for every hint: about three times the cost per hint.
    """
    from celery.utils import uuid

    from scheduler_project.celery import app

    by_class: dict[str, list] = {}
    for hint in hints:
        by_class.setdefault(hint.resource_class, []).append(hint)
    with producer.batch(max_size=len(hints)):
        for queue, queued in by_class.items():
            headers, properties, body, _ = app.amqp.as_task_v2(
                "", EXECUTE_TASK, args=[], ignore_result=True, reply_to=app.thread_oid
            )
            declared = app.amqp.queues[queue]
            producer.maybe_declare(declared)  # once per batch, not per message
            rest, mode = body[1:], declared.exchange.delivery_mode or PERSISTENT
            step = batching.class_batch(queue)
            for start in range(0, len(queued), step):
                task_id = uuid()
                args = [queued[start].run_id, queue, len(queued[start:start + step])]
                producer.publish(
                    (args, *rest),
                    exchange="",
                    routing_key=queue,
                    serializer="json",
                    headers={**headers, "id": task_id, "root_id": task_id, "argsrepr": repr(args)},
                    correlation_id=task_id,
                    reply_to=properties["reply_to"],
                    delivery_mode=mode,
                    retry=False,
                )


def queued_claims(resource_class: str) -> int:
    """At most how many claims the hints waiting in a resource class's Redis queue (not
    yet taken by a worker) are worth: each message is worth up to the class's batch."""
    from scheduler_project.celery import app

    with app.connection_for_read() as connection:
        return connection.default_channel.client.llen(resource_class) * batching.class_batch(resource_class)


def broker_epoch() -> str:
    """The broker's incarnation: Redis's run_id, new at every server start."""
    from scheduler_project.celery import app

    with app.connection_for_read() as connection:
        return connection.default_channel.client.info("server")["run_id"]


def relay_all(epoch: str = "") -> int:
    """Relay until nothing is left, publishing each batch over one broker connection."""
    from scheduler_project.celery import app

    total = 0
    while True:
        with app.producer_or_acquire() as producer:
            published, failed = relay_pass(lambda hints: publish_hints(hints, producer), epoch=epoch)
        total += published
        if failed or not published:
            return total


_seen_epoch = None  # the broker incarnation this process's last relay step saw


def republish_and_relay() -> int:
    """One relay step (the relay command's loop and the beat backstop): republish hints the
    broker lost, then publish everything unpublished."""
    global _seen_epoch
    epoch = broker_epoch()
    if epoch != _seen_epoch:  # this process's first step, or the broker restarted since the last
        restarted = republish_after_broker_restart(epoch)
        if restarted:
            relay_log.warning("the broker restarted: republishing %d hints it lost", restarted)
        _seen_epoch = epoch
    published = relay_all(epoch)
    # The time-based backstop after what is ready has gone: a wake-up at a wave's first
    # commit publishes before it reads anything else.
    republished = republish_lost_hints(queued_claims)
    if republished:
        relay_log.warning("republishing %d hints that look lost", republished)
        published += relay_all(epoch)
    return published
