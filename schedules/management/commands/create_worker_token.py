import json

from django.core.management.base import BaseCommand, CommandError

from schedules.tenants import worker_token_create


class Command(BaseCommand):
    help = 'Create a worker token; the last line of output is {"workerId", "token"}.'

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument(
            "--classes", default="", help="comma-separated resource classes this worker may claim (default: all)"
        )

    def handle(self, *args, **options):
        classes = [c.strip() for c in options["classes"].split(",") if c.strip()]
        try:
            token, secret = worker_token_create(options["name"], resource_classes=classes)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"workerId": token.id, "token": secret}))
