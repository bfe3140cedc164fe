"""Getting claimed work to executors: broker hints (Redis mode) or the embedded pool."""

import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from runs import authority
from runs.relay import relay_pass, republish_lost_hints

log = logging.getLogger(__name__)
relay_log = logging.getLogger("scheduler.relay")


# workers.tasks.execute, sent by name so that publishing never imports the task module.
EXECUTE_TASK = "scheduler.execute"


def publish_hint(row, producer=None) -> None:
    """Send one run id to its resource class's queue; returns once Redis accepted it."""
    from scheduler_project.celery import app

    app.send_task(
        EXECUTE_TASK,
        args=[row.run_id, row.resource_class],
        queue=row.resource_class,
        retry=False,
        producer=producer,
        ignore_result=True,  # what the task's own apply_async would put in the message
    )


def queue_depth(resource_class: str) -> int:
    """Messages waiting in a resource class's Redis queue (hints not yet taken by a worker)."""
    from scheduler_project.celery import app

    with app.connection_for_read() as connection:
        return connection.default_channel.client.llen(resource_class)


def relay_all() -> int:
    """Relay until nothing is left, publishing each batch over one broker connection."""
    from scheduler_project.celery import app

    total = 0
    while True:
        with app.producer_or_acquire() as producer:
            published, failed = relay_pass(lambda row: publish_hint(row, producer))
        total += published
        if failed or not published:
            return total


def republish_and_relay() -> int:
    """One relay step (the relay command's loop and the beat backstop): republish hints the
    broker lost, then publish everything unpublished."""
    republished = republish_lost_hints(queue_depth)
    if republished:
        relay_log.warning("republishing %d hints that look lost", republished)
    return relay_all()


class EmbeddedDispatcher:
    """The design's baseline without a broker: claim straight from the run table into a
    bounded local pool per resource class. Claims are weighted-fair and respect limits."""

    def __init__(self, pools: dict[str, int], *, poll_interval: float = 0.2, lease_seconds: int | None = None):
        self.pools = pools
        self.poll_interval = poll_interval
        self.lease_seconds = lease_seconds
        self.label = f"embedded:{socket.gethostname()}:{os.getpid()}"
        self.executors = {rc: ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"job-{rc}") for rc, n in pools.items()}
        self.busy = {rc: 0 for rc in pools}
        self.lock = threading.Lock()
        self.wake = threading.Event()

    def run(self, stopper) -> None:
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

    def dispatch_once(self) -> int:
        claimed = 0
        for rc, size in self.pools.items():
            with self.lock:
                free = size - self.busy[rc]
            if free <= 0:
                continue
            runs = authority.claim_many(
                n=free, worker_label=self.label, resource_classes=[rc], lease_seconds=self.lease_seconds
            )
            for run in runs:
                with self.lock:
                    self.busy[rc] += 1
                self.executors[rc].submit(self._execute, rc, run)
            claimed += len(runs)
        return claimed

    def _execute(self, rc: str, run) -> None:
        from workers.runtime import execute_claimed

        try:
            execute_claimed(run)
        except Exception:
            log.exception("execution of %s crashed; the sweeper will recover it", run.id)
        finally:
            connection.close()
            with self.lock:
                self.busy[rc] -= 1
            self.wake.set()
