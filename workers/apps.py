from django.apps import AppConfig, apps
from django.core.management.base import CommandError
from django.db.models.signals import post_migrate


class WorkersConfig(AppConfig):
    name = "workers"

    def ready(self):
        # The built-in jobs declare themselves on import; so do the teams' jobs, found here.
        import workers.jobs.builtin  # noqa: F401
        import workers.jobs.celery_bridge  # noqa: F401
        from workers.jobs.discovery import discover_jobs

        discover_jobs()
        # Like contenttypes: the catalog's rows follow the declarations once the schema exists.
        # The JobType table belongs to the schedules app, whose post_migrate this follows.
        post_migrate.connect(_sync_job_types, sender=apps.get_app_config("schedules"),
                             dispatch_uid="workers.sync_job_types")


def _sync_job_types(using, verbosity=1, stdout=None, apps=apps, **kwargs):
    from workers.jobs.catalog import CatalogConflict, job_types_sync

    try:
        apps.get_model("schedules", "JobType")
    except LookupError:
        return  # migrated back past the catalog's table
    try:
        changes = job_types_sync(using=using)
    except CatalogConflict as exc:
        raise CommandError(str(exc)) from exc
    if verbosity and stdout is not None:
        for change in changes:
            stdout.write(f"  Job types: {change.describe()}")
