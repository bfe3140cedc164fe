import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")

from kernel.connections import use_web_connection_pool  # noqa: E402

# The web process: its gunicorn threads share a bounded pool (docs/operations.md, "Connection budget").
use_web_connection_pool()

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

from kernel.startup import require_secrets  # noqa: E402 - needs the settings above

require_secrets()
