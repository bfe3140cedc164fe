import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")

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
