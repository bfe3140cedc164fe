import os

from celery import Celery
from celery.signals import beat_init, worker_init, worker_ready, worker_shutdown

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
def _refuse_to_start_without_secret_key(**_):
    from django.core.exceptions import ImproperlyConfigured

    from scheduler_project.startup import require_secret_key

    try:
        require_secret_key()
    except ImproperlyConfigured as exc:
        # Celery logs and swallows a handler's Exception; SystemExit stops the process.
        raise SystemExit(f"refusing to start: {exc}") from None


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
