"""Query string parsing for the console's lists. Every value is checked; a bad one is a
BadFilter (400), whatever bytes it holds."""

from datetime import datetime, timezone

from console.access import BadFilter
from schedules.recurrence import parse_instant

MAX_TEXT = 200
PAGE_SIZE = 50


def text(params, name: str) -> str:
    value = params.get(name, "")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise BadFilter(f"{name} is too long or holds a NUL character")
    return value.strip()


def choice(params, name: str, allowed) -> str:
    value = text(params, name)
    if value and value not in allowed:
        raise BadFilter(f"{name} must be one of {', '.join(allowed)}")
    return value


def identifier(params, name: str) -> str:
    value = text(params, name)
    if value and not all(ch.isalnum() or ch in "_-" for ch in value):
        raise BadFilter(f"{name} is not an id")
    return value


def keyset(params, name: str) -> tuple[datetime, str] | None:
    """`<ISO instant>~<id>`: the position after which the next page starts."""
    value = text(params, name)
    if not value:
        return None
    moment, sep, key = value.partition("~")
    try:
        parsed = parse_instant(moment) if sep else None
    except ValueError:
        parsed = None
    if parsed is None or not key or not key.replace("_", "").isalnum():
        raise BadFilter(f"{name} is not a page position")
    return parsed, key


def keyset_value(moment: datetime, key: str) -> str:
    return f"{moment.astimezone(timezone.utc).isoformat()}~{key}"
