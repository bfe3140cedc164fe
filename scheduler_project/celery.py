import os

from celery import Celery
from celery.signals import (
    beat_init,
    task_postrun,
    task_prerun,
    task_received,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
# Celery's Django fixup runs Django's system checks when a worker starts and ignores what they
# find; running them imports the URLconf, with the API, DRF and the console: 7 MiB in every
# pool process that never serves HTTP. `manage.py migrate` and `check` run them where they count.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("scheduler_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _refuse_to_start_without_real_secrets(**_):
    from django.core.exceptions import ImproperlyConfigured

    from kernel.startup import require_secrets

    try:
        require_secrets()
    except ImproperlyConfigured as exc:
        # Celery logs and swallows a handler's Exception; SystemExit stops the process.
        raise SystemExit(f"refusing to start: {exc}") from None


@worker_init.connect
def _keep_database_connections_between_tasks(sender=None, **_):
    """A task gets the connection handling Django gives a request: ``close_old_connections``
    before and after it, which closes a connection older than ``CONN_MAX_AGE``, one left
    inside a transaction, or one an error left unusable, and keeps the others. Celery's Django
    fixup closes every connection around every task instead (celery/celery#9824 reverted
    honouring ``CONN_MAX_AGE``): each hint paid for a new PostgreSQL backend (fork,
    authentication, cold catalog caches), about 1 ms of CPU per run of a burst."""
    from celery.fixups.django import DjangoFixup
    from django.db import close_old_connections

    for fixup in sender.app._fixups:
        if isinstance(fixup, DjangoFixup):
            # on_task_prerun / on_task_postrun call this; a forked child still closes what it
            # inherited (on_worker_process_init calls _close_database).
            fixup.worker_fixup.close_database = lambda **_: close_old_connections()


_reporter = None


@worker_ready.connect
def _report_slots(sender=None, **_):
    """Live capacity: this worker's concurrency, for each resource-class queue it consumes."""
    global _reporter
    import os
    import socket

    from django.conf import settings

    from workers.capacity_report import SlotReporter

    queues = [q for q in sender.app.amqp.queues.consume_from if q in settings.RESOURCE_CLASSES]
    slots = {q: sender.controller.concurrency for q in queues}
    if slots:
        _reporter = SlotReporter(f"celery:{socket.gethostname()}:{os.getpid()}", slots).start()


@worker_shutdown.connect
def _withdraw_slots(**_):
    if _reporter is not None:
        _reporter.stop()


# Free processes claim from the authority when the queues stay quiet (workers/idle_claims.py).
@worker_init.connect
def _share_idle_state(sender=None, **_):
    from workers import idle_claims

    idle_claims.prepare(sender)


@task_received.connect
def _note_task_received(**_):
    from workers import idle_claims

    idle_claims.received()


@worker_process_init.connect
def _start_idle_claims(**_):
    from workers import idle_claims

    idle_claims.start()


@worker_init.connect
def _refuse_a_pool_that_cannot_stop_a_stuck_job(sender=None, **_):
    """A job stuck past its hard timeout is stopped by ending the process it runs in
    (workers.timeouts): a prefork pool process, which the pool replaces; with the solo pool the
    worker itself, which its supervisor starts again. A pool of threads or greenlets runs
    every job in one process that may not be ended for one of them: refused."""
    import logging

    from celery import concurrency
    from django.conf import settings

    from workers import timeouts

    pool = concurrency.get_implementation(sender.pool_cls)
    path = f"{pool.__module__}:{pool.__qualname__}"
    name = next((alias for alias, target in concurrency.ALIASES.items() if target == path), path)
    if name == "solo":
        timeouts.allow_process_exit()
        logging.getLogger(__name__).warning(
            "solo pool: a job still running %gs past its timeout ends this worker process; run it under a "
            "supervisor that starts it again", settings.JOB_HARD_TIMEOUT_GRACE_SECONDS)
    elif path != concurrency.ALIASES["prefork"]:
        raise SystemExit(f"refusing to start: the {name} pool runs every job in this one process, where a job "
                         f"stuck past its timeout could be neither interrupted out of a blocking call nor ended; "
                         f"use the prefork pool (or solo, under a supervisor)")


@worker_process_init.connect
def _may_end_at_a_hard_timeout(**_):
    """A prefork pool process is ended at a job's hard timeout; the pool starts another
    (workers.timeouts)."""
    import billiard

    from workers import timeouts

    if billiard.current_process().name != "MainProcess":
        timeouts.allow_process_exit()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _stop_idle_claims(**_):
    from workers import idle_claims

    idle_claims.stop()


@task_prerun.connect
def _hold_the_process(**_):
    from workers import idle_claims

    idle_claims.task_started()


@task_postrun.connect
def _release_the_process(**_):
    from workers import idle_claims

    idle_claims.task_finished()
