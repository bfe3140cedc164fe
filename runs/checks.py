"""What a production PostgreSQL needs for a runs table that keeps history, checked where it
can be seen from inside (a database check: `manage.py migrate`, `check --database default`
and `verify_integrity` run it). docs/operations.md, "A production PostgreSQL", says why each matters. A database
that cannot be reached, or the embedded SQLite, is not warned about here."""

from django.core import checks
from django.db import DatabaseError, connections

DOCS = "docs/operations.md, 'A production PostgreSQL'"

# Settings of the server, each with the value it needs and why.
SERVER_SETTINGS = {
    "autovacuum": ("on", "finished runs leave dead rows behind at every transition; without autovacuum the run "
                         "tables and their indexes only grow, and the visibility map that index-only reads rely on "
                         "is never set"),
    "track_counts": ("on", "autovacuum decides what to vacuum from these counts"),
}

SHARED_BUFFERS_AT_LEAST = 1024**3

# The tables that grow with history, and the per-table autovacuum settings each needs once it
# is large: PostgreSQL's default re-analyze threshold (10 % of the table) is never reached by a
# wave of a few thousand runs in a table of millions, nor its vacuum threshold (20 %) for weeks.
HISTORY_TABLES_FROM = 1_000_000  # rows, as pg_class.reltuples estimates them
AUTOVACUUM_SETTINGS = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_analyze_scale_factor": "0.005",
    "autovacuum_vacuum_insert_scale_factor": "0.01",
}
AUTOVACUUM_NEEDED = ("autovacuum_vacuum_scale_factor", "autovacuum_analyze_scale_factor")


def history_tables() -> list[str]:
    """runs, attempts, dispatch intents, the object registry and effect intents."""
    from runs.models import Attempt, EffectIntent, Outbox, Run, StoredObject

    return [model._meta.db_table for model in (Run, Attempt, Outbox, StoredObject, EffectIntent)]


@checks.register(checks.Tags.database)
def postgresql_for_history(app_configs, databases=None, **kwargs):
    found = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        try:
            with connection.cursor() as cursor:
                found += _server_settings(cursor, alias) + _shared_buffers(cursor, alias) + _run_tables(cursor, alias)
        except DatabaseError:
            continue  # unreachable: the command that needs it says so itself
    return found


def _server_settings(cursor, alias: str) -> list:
    found = []
    for name, (wanted, why) in SERVER_SETTINGS.items():
        cursor.execute(f"SHOW {name}")
        value = cursor.fetchone()[0]
        if value != wanted:
            found.append(checks.Warning(
                f"PostgreSQL {name} is {value} on database {alias!r}: {why}.",
                hint=f"Set {name} = {wanted} ({DOCS}).",
                id="runs.W001"))
    return found


def _shared_buffers(cursor, alias: str) -> list:
    cursor.execute("SELECT current_setting('shared_buffers'), pg_size_bytes(current_setting('shared_buffers'))")
    value, size = cursor.fetchone()
    if size >= SHARED_BUFFERS_AT_LEAST:
        return []
    return [checks.Warning(
        f"PostgreSQL shared_buffers is {value} on database {alias!r}: below 1 GB, the live indexes and the pages "
        f"of the last hours' runs do not stay cached next to a history.",
        hint=f"Set shared_buffers to about a quarter of the host's memory, at least 1GB, in postgresql.conf "
             f"(a restart) ({DOCS}).",
        id="runs.W002")]


def _run_tables(cursor, alias: str) -> list:
    cursor.execute(
        "SELECT t.name, c.reltuples::bigint, coalesce(c.reloptions, '{}') FROM unnest(%s::text[]) AS t(name)"
        " JOIN pg_class AS c ON c.oid = to_regclass(t.name) WHERE c.reltuples >= %s ORDER BY t.name",
        [history_tables(), HISTORY_TABLES_FROM])
    found = []
    settings = ", ".join(f"{name} = {value}" for name, value in AUTOVACUUM_SETTINGS.items())
    for table, rows, options in cursor.fetchall():
        if all(any(option.startswith(f"{name}=") for option in options) for name in AUTOVACUUM_NEEDED):
            continue
        found.append(checks.Warning(
            f"Table {table} holds about {rows:,} rows on database {alias!r} and has no autovacuum settings of its "
            f"own: with PostgreSQL's defaults it is analyzed after 10 % of it changed and vacuumed after 20 %, "
            f"which a wave of new runs never reaches.",
            hint=f"ALTER TABLE {table} SET ({settings}); see {DOCS}.",
            id="runs.W003"))
    return found
