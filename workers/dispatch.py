"""Getting claimed work to executors: broker hints (Redis mode) or the embedded pool."""

import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from runs import authority
from runs.relay import relay_pass, republish_after_broker_restart, republish_lost_hints
from workers import batching
from workers.jobs.framework import declared_jobs

log = logging.getLogger(__name__)
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


class EmbeddedDispatcher:
    """The design's baseline without a broker: claim straight from the run table into a
    bounded local pool per resource class. Claims are weighted-fair and respect limits, and
    take only runs of the job types this process has code for (the others wait for a
    dispatcher that has it; they are counted every ``UNKNOWN_CHECK_SECONDS`` at most)."""

    UNKNOWN_CHECK_SECONDS = 5.0

    def __init__(self, pools: dict[str, int], *, poll_interval: float = 0.2, lease_seconds: int | None = None,
                 job_processes: bool = False):
        """``job_processes``: execute jobs in processes of their own (workers.job_processes),
        which a hard timeout may end; else on the pool's threads, where a job past its
        timeout is only interrupted when it checks in (the dispatch command uses processes)."""
        from workers.job_processes import JobProcesses

        self.pools = pools
        self.processes = {rc: JobProcesses(n) for rc, n in pools.items()} if job_processes else None
        self.poll_interval = poll_interval
        self.lease_seconds = lease_seconds
        self.label = f"embedded:{socket.gethostname()}:{os.getpid()}"
        self.executors = {rc: ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"job-{rc}") for rc, n in pools.items()}
        self.busy = {rc: 0 for rc in pools}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.unknown_checked_at = {rc: float("-inf") for rc in pools}

    def run(self, stopper) -> None:
        from workers.capacity_report import SlotReporter

        reporter = SlotReporter(self.label, self.pools).start()
        try:
            self._loop(stopper)
        finally:
            reporter.stop()

    def _loop(self, stopper) -> None:
        while not stopper.stopped:
            claimed = 0
            try:
                close_old_connections()
                claimed = self.dispatch_once()
            except (DatabaseError, InterfaceError) as exc:
                log.warning("dispatcher: database error, reconnecting: %s", exc)
                connection.close()
            if not claimed:
                self.wake.wait(self.poll_interval)
                self.wake.clear()
        for executor in self.executors.values():
            executor.shutdown(wait=True)
        for processes in (self.processes or {}).values():
            processes.stop()

    def dispatch_once(self) -> int:
        """Claim for every free slot, each slot a batch as big as this process takes at
        once for the class (workers.batching); every batch runs on one pool thread."""
        job_types = list(declared_jobs())
        claimed = 0
        for rc, size in self.pools.items():
            with self.lock:
                free = size - self.busy[rc]
            if free <= 0:
                continue
            runs = authority.claim_many(
                n=free * batching.claim_size(rc, batching.class_batch(rc)), worker_label=self.label,
                resource_classes=[rc], lease_seconds=self.lease_seconds, job_types=job_types,
            )
            if len(runs) < free and time.monotonic() - self.unknown_checked_at[rc] >= self.UNKNOWN_CHECK_SECONDS:
                self.unknown_checked_at[rc] = time.monotonic()
                authority.pass_over(spare=free - len(runs), resource_classes=[rc], job_types=job_types,
                                    reoffer=False)
            claimed_at = time.monotonic()
            for batch in (runs[slot::free] for slot in range(min(free, len(runs)))):
                with self.lock:
                    self.busy[rc] += 1
                self.executors[rc].submit(self._execute, rc, batch, claimed_at)
            claimed += len(runs)
        return claimed

    def _execute(self, rc: str, runs, claimed_at: float) -> None:
        from workers.runtime import execute_batch

        try:
            if self.processes:
                executed = self.processes[rc].execute(runs, claimed_at)
            else:
                executed = execute_batch(runs, claimed_at=claimed_at)
            batching.observe(rc, len(executed), sum(done.job_seconds for done in executed))
        except Exception:
            log.exception("execution of %s crashed; the sweeper will recover them", [run.id for run in runs])
        finally:
            # The thread keeps its connection for the next batch, as a request's thread does;
            # one past CONN_MAX_AGE, left in a transaction or broken by an error is closed.
            close_old_connections()
            with self.lock:
                self.busy[rc] -= 1
            self.wake.set()
