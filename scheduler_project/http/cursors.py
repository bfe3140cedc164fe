"""Opaque, tamper-evident pagination cursors.

A cursor is a signed payload bound to the listing it came from (its `scope`: the tenant
for schedules, the schedule for run history), so it can neither be edited nor replayed
against another listing. Any failure is 400 invalid_request with field "cursor".
"""

from datetime import datetime

from django.core import signing

from kernel.errors import InvalidRequest

_SALT = "scheduler.http.cursor"
MAX_CURSOR_LENGTH = 2000


def encode_cursor(scope: str, payload: dict) -> str:
    return signing.dumps({"s": scope, "p": payload}, salt=_SALT, compress=True)


def decode_cursor(scope: str, token: str) -> dict:
    if len(token) > MAX_CURSOR_LENGTH:
        raise InvalidRequest("invalid cursor", field="cursor")
    try:
        data = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError, UnicodeError, OverflowError):
        raise InvalidRequest("invalid cursor", field="cursor") from None
    if not isinstance(data, dict) or data.get("s") != scope or not isinstance(data.get("p"), dict):
        raise InvalidRequest("invalid cursor", field="cursor")
    return data["p"]


def cursor_instant(value) -> datetime:
    """An instant stored in a decoded cursor (we wrote it, but stay defensive)."""
    try:
        instant = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidRequest("invalid cursor", field="cursor") from None
    if instant.tzinfo is None:
        raise InvalidRequest("invalid cursor", field="cursor")
    return instant
