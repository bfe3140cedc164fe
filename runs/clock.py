"""Authority time: the database's clock, read after lock waits. Never a worker's clock."""

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
