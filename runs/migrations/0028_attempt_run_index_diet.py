"""Attempts lose their index on run_id alone: attempt_number_unique and attempt_fence_unique
both begin with run_id and serve every read by run. Only the index is dropped (CONCURRENTLY
on PostgreSQL, no lock on writers); the foreign key stays as it is, never re-validated."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "runs_attempt_run_id_651e9d12"


def drop_index(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {INDEX}")


def create_index(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"CREATE INDEX {concurrently}IF NOT EXISTS {INDEX} ON runs_attempt (run_id)")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0027_attempt_timeout"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="attempt",
                    name="run",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="attempts", to="runs.run"),
                ),
            ],
            database_operations=[migrations.RunPython(drop_index, create_index, atomic=False)],
        ),
    ]
