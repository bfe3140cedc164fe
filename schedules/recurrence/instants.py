"""Instants as text: the one reading of an instant a client sends (request bodies, query
strings, recurrence anchors), and the range every zone's wall clock can show.

Python's ISO parser is lenient where the contract is not: it takes any single character
between date and time (a space, `X`), a space before the offset, and digits of any script
once the text is normalized. Only the shape below reaches it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

UTC = timezone.utc
# Every instant the scheduler accepts or computes can be shown on every zone's wall clock:
# a day's margin from datetime's ends covers the widest UTC offset any zone ever had.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
MAX_INSTANT_LENGTH = 40
# Date, `T`, time, then `Z` or an offset; ASCII digits only. What each part means (months,
# hours, fractions) is left to datetime.fromisoformat.
_SHAPE = re.compile(r"[0-9]{4}-?(?:[0-9]{2}-?[0-9]{2}|W[0-9]{2}-?[0-9])T[0-9:.,]+(?:Z|[+-][0-9:.]+)",
                    re.ASCII | re.IGNORECASE)


class NotAnInstant(ValueError):
    """Not an ISO 8601 instant with `T` between date and time and a UTC offset or Z."""


class InstantOutOfRange(ValueError):
    """An instant, but outside EARLIEST..LATEST once its offset is applied."""


def renderable(instant: datetime) -> bool:
    """Whether every zone's wall clock can show ``instant`` (aware)."""
    return EARLIEST <= instant <= LATEST


def parse_instant(value: object) -> datetime:
    """``value``, an ISO 8601 instant with a UTC offset or Z, as an aware UTC datetime.

    NotAnInstant for anything else: not a string, longer than MAX_INSTANT_LENGTH, a space
    or any other separator than `T`, a naive time, a NUL or junk after the instant.
    InstantOutOfRange when the instant is not renderable."""
    if not isinstance(value, str) or len(value) > MAX_INSTANT_LENGTH or not _SHAPE.fullmatch(value):
        raise NotAnInstant(value)
    text = value[:-1] + "+00:00" if value[-1] in "Zz" else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise NotAnInstant(value) from None
    try:
        instant = parsed.astimezone(UTC)
    except OverflowError:  # the offset carries it past datetime's range
        raise InstantOutOfRange(value) from None
    if not renderable(instant):
        raise InstantOutOfRange(value)
    return instant
