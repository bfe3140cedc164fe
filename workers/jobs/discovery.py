"""Finding the job declarations at start, as Django's admin finds `admin` modules and Celery `tasks`."""

from importlib import import_module

from django.conf import settings
from django.utils.module_loading import autodiscover_modules


def discover_jobs() -> None:
    """Import the `jobs` module of every installed app, then every module in SCHEDULER_JOB_MODULES.

    Importing a module runs its ``@scheduler_job`` declarations; an error in one stops the start,
    so a worker never runs without a job it was deployed with.
    """
    autodiscover_modules("jobs")
    for module in settings.SCHEDULER_JOB_MODULES:
        import_module(module)
