"""What a production PostgreSQL needs for a runs table that keeps history, checked where it
can be seen from inside (a database check: `manage.py migrate` and `check --database default`
run it). docs/operations.md, "A database with history", says why each matters."""

from django.core import checks
from django.db import connections

# Settings of the server, each with the value it needs and why.
SERVER_SETTINGS = {
    "autovacuum": ("on", "finished runs leave dead rows behind at every transition; without autovacuum the run "
                         "tables and their indexes only grow, and the visibility map that index-only reads rely on "
                         "is never set"),
    "track_counts": ("on", "autovacuum decides what to vacuum from these counts"),
}


@checks.register(checks.Tags.database)
def postgresql_for_history(app_configs, databases=None, **kwargs):
    found = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        with connection.cursor() as cursor:
            for name, (wanted, why) in SERVER_SETTINGS.items():
                cursor.execute(f"SHOW {name}")
                value = cursor.fetchone()[0]
                if value != wanted:
                    found.append(checks.Warning(
                        f"PostgreSQL {name} is {value} on database {alias!r}: {why}.",
                        hint=f"Set {name} = {wanted} (docs/operations.md, 'A database with history').",
                        id="runs.W001"))
    return found
