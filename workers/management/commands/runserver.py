"""`manage.py runserver`: Django's development server, static files included, as the web
process: the same connection pool as gunicorn's (scheduler_project/wsgi.py) and the same
secrets rule as `serve`."""

import os

from django.conf import settings
from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from kernel.connections import use_web_connection_pool
from kernel.startup import serve_secrets_ensure


class Command(StaticFilesRunserver):
    def handle(self, *args, **options):
        # Before its checks open a connection: wsgi.py, imported after them, then finds its pool in place.
        use_web_connection_pool()
        try:
            serve_secrets_ensure()
        except ImproperlyConfigured as refused:
            raise CommandError(str(refused)) from None
        if settings.EMBEDDED_DATABASE and not os.environ.get("SECRET_KEY"):
            # The embedded key may have been made just now, after settings were read: serve with it.
            settings.SECRET_KEY = settings.EMBEDDED_SECRET_KEY_FILE.read_text().strip()
        super().handle(*args, **options)
