"""Bring the job type catalog in step with the @scheduler_job declarations (migrate does it too)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from workers.jobs.catalog import CatalogConflict, job_types_sync


class Command(BaseCommand):
    help = ("Sync the job type catalog from the job declarations and print what changed: added, "
            "changed fields, disabled. A params_schema change needs a params_schema_version bump.")

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true",
                            help="change nothing; print the differences and exit 1 when there are any")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args, check, database, **options):
        try:
            changes = job_types_sync(apply=not check, using=database)
        except CatalogConflict as exc:
            raise CommandError(str(exc)) from exc
        for change in changes:
            self.stdout.write(change.describe())
        if not changes:
            self.stdout.write("job types: the catalog matches the declarations")
        elif check:
            raise CommandError(f"{len(changes)} job type(s) differ from their declarations; "
                               "run manage.py sync_job_types")
