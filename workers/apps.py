from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class WorkersConfig(AppConfig):
    name = "workers"

    def ready(self):
        # The built-in jobs declare themselves on import; so do the teams' jobs, found here.
        import workers.jobs.builtin  # noqa: F401
        from workers.jobs.discovery import discover_jobs

        discover_jobs()

        # Like contenttypes: the catalog's rows follow the declarations once the schema exists.
        # The JobType table belongs to the schedules app, whose post_migrate this follows.
        post_migrate.connect(_sync_job_types, sender=apps.get_app_config("schedules"),
                             dispatch_uid="workers.sync_job_types")


def _sync_job_types(using, **kwargs):
    from workers.jobs.catalog import job_types_ensure

    job_types_ensure(using)
