from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulesConfig(AppConfig):
    name = "schedules"

    def ready(self):
        post_migrate.connect(_sync_builtin_job_types, sender=self)


def _sync_builtin_job_types(using, **kwargs):
    # Like contenttypes: rows for the catalog's job types exist once the schema does.
    from schedules.tenants import builtin_job_types_ensure

    builtin_job_types_ensure()
