"""What a long-running process (web, worker, loop) checks before it starts."""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def require_secret_key() -> None:
    """Refuse to start without a signing key (settings leave it empty when DEBUG is off and
    none is configured): links and cursors signed with a known key could be forged."""
    try:
        configured = bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django's answer to reading an empty SECRET_KEY
        configured = False
    if not configured:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. It signs result links and cursors: set it in the environment "
            "(`python -c 'import secrets; print(secrets.token_urlsafe(50))'`). Only the embedded "
            "`make run` generates one for itself, into var/secret-key."
        )


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
