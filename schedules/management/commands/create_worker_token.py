import json

from django.core.management.base import BaseCommand

from schedules.tenants import worker_token_create


class Command(BaseCommand):
    help = 'Create a worker token; the last line of output is {"workerId", "token"}.'

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, **options):
        token, secret = worker_token_create(options["name"])
        self.stdout.write(json.dumps({"workerId": token.id, "token": secret}))
