"""Drop the varchar_pattern_ops ("_like") indexes Django adds beside every indexed CharField
on PostgreSQL. Ids are opaque and never matched with LIKE, so they only cost writes: the
09:00 wave updates every due schedule and inserts every occurrence and outbox row."""

from django.db import migrations

TABLE_PREFIXES = ("schedules_", "runs_", "effects_")


def drop_like_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname LIKE %s AND split_part(tablename, '_', 1) || '_' = ANY(%s)",
            [r"%\_like", list(TABLE_PREFIXES)],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0002_initial"),
        ("schedules", "0001_initial"),
        ("effects", "0002_initial"),
    ]

    operations = [migrations.RunPython(drop_like_indexes, migrations.RunPython.noop)]
