"""The job type catalog (schedules.JobType rows) kept in step with the job declarations."""

from schedules.models import JobType
from workers.jobs.framework import declared_jobs


def job_types_ensure(using: str = "default") -> None:
    """Create the row of every declared job type that has none."""
    for name, declaration in declared_jobs().items():
        JobType.objects.using(using).get_or_create(name=name, defaults=declaration.catalog_fields())
