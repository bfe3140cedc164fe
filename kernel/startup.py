"""What a long-running process (web, worker, loop) checks before it starts."""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Every secret in .env.example is a value starting with this: copied unchanged, it is refused.
PLACEHOLDER_PREFIX = "replace-"
GENERATE_A_SECRET = "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"


def require_secrets() -> None:
    """Refuse to start without a signing key (settings leave it empty when DEBUG is off and
    none is configured), or with a secret still at its .env.example placeholder: links and
    cursors signed with a known key could be forged, a known metrics token opens /metrics."""
    try:
        configured = bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django's answer to reading an empty SECRET_KEY
        configured = False
    if not configured:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. It signs result links and cursors: set it in the environment "
            f"(`{GENERATE_A_SECRET}`). Only the embedded `make run` generates one for itself, into var/secret-key."
        )
    placeholders = [name for name, value in _configured_secrets().items() if value.startswith(PLACEHOLDER_PREFIX)]
    if placeholders:
        verb = "is" if len(placeholders) == 1 else "are"
        raise ImproperlyConfigured(
            f"{', '.join(placeholders)} {verb} still the placeholder of .env.example ({PLACEHOLDER_PREFIX}...): "
            f"set a real value (`{GENERATE_A_SECRET}`)."
        )


def _configured_secrets() -> dict[str, str]:
    """The secrets a scheduler process is given, by the name an operator sets."""
    return {
        "SECRET_KEY": settings.SECRET_KEY,
        "METRICS_TOKEN": settings.METRICS_TOKEN,
        "the password in DATABASE_URL": settings.DATABASES["default"].get("PASSWORD") or "",
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "EMAIL_HOST_PASSWORD": getattr(settings, "EMAIL_HOST_PASSWORD", ""),
    }


def serve_secrets_ensure() -> None:
    """`manage.py serve` (`make run`): the embedded installation (SQLite, no SECRET_KEY set)
    makes its own key; any other refuses to start without real secrets."""
    if settings.EMBEDDED_DATABASE and not os.environ.get("SECRET_KEY"):
        embedded_secret_key_ensure(settings.EMBEDDED_SECRET_KEY_FILE)  # the children read it
    else:
        require_secrets()


def embedded_secret_key_ensure(path: Path) -> None:
    """The embedded installation's key: generated once at `path`, readable by its owner only,
    and reused by every later start (settings read it from there)."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another start made it first: use that one
        return
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(50) + "\n")
