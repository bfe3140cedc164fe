import json

from django.core.management.base import BaseCommand

from schedules.tenants import operator_token_create


class Command(BaseCommand):
    help = 'Create an operator token (capacity forecast of the whole installation); prints {"tokenId", "token"}.'

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name, **options):
        token, secret = operator_token_create(name)
        self.stdout.write(json.dumps({"tokenId": token.id, "token": secret}))
