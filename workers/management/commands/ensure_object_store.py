from django.core.management.base import BaseCommand

from objectstore import get_object_store


class Command(BaseCommand):
    help = "Create the object store's directory or bucket (with versioning) if absent."

    def handle(self, *args, **options):
        get_object_store().ensure_ready()
        self.stdout.write("object store ready")
