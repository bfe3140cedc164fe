from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulesConfig(AppConfig):
    name = "schedules"

    def ready(self):
        post_migrate.connect(_sync_builtin_job_types, sender=self)


def _sync_builtin_job_types(using, **kwargs):
    # Like contenttypes: the catalog in code is the source of the JobType rows.
    from schedules.job_types import BUILTIN_JOB_TYPES
    from schedules.models import JobType

    for name, fields in BUILTIN_JOB_TYPES.items():
        JobType.objects.using(using).update_or_create(name=name, defaults=fields)
