"""Authority time: the database's clock, read after lock waits. Never a worker's clock.
And the one text form of an instant that the API, mail and webhooks show."""

from datetime import datetime, timezone as dt_timezone

from django.db import connection
from django.utils import timezone


def authority_now():
    if connection.vendor == "postgresql":
        # clock_timestamp(), not now(): now() is frozen at transaction start, before lock waits.
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            return cursor.fetchone()[0]
    # Embedded SQLite lives on this host: its clock is the process clock.
    return timezone.now()


def instant(value: datetime | None) -> str | None:
    """ISO 8601 UTC with a Z suffix; fractional seconds only when the instant has them."""
    if value is None:
        return None
    # isoformat, unlike strftime("%Y"), zero-pads years before 1000; in UTC it ends "+00:00".
    return value.astimezone(dt_timezone.utc).isoformat()[:-6] + "Z"
