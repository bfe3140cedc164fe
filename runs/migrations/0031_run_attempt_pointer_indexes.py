"""A run's two attempt pointers (current_attempt_id, accepted_attempt_id) are indexed only
where set. Their whole-table indexes held a NULL entry for every queued run's version and
every running run's accepted attempt, written at each of those versions and never read: the
foreign keys' look-ups ask for one attempt id, which a partial index on `IS NOT NULL` answers.

The partial indexes are built before the whole ones go, each CONCURRENTLY on PostgreSQL
(kernel.migration_ops; no lock on readers or writers; on a history of millions of runs the
build reads the table once per index). The foreign keys stay as they are, never re-validated."""

from django.db import migrations, models

import django.db.models.deletion
from kernel.migration_ops import AddIndexOnline

# (column, the whole index Django made for it)
WHOLE = [
    ("current_attempt_id", "runs_run_current_attempt_id_684c92a3"),
    ("accepted_attempt_id", "runs_run_accepted_attempt_id_b1e11038"),
]


def _concurrently(schema_editor) -> str:
    return "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""


def drop_whole(apps, schema_editor):
    for _, index in WHOLE:
        schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {index}")


def create_whole(apps, schema_editor):
    for column, index in WHOLE:
        schema_editor.execute(f'CREATE INDEX {_concurrently(schema_editor)}IF NOT EXISTS {index} ON runs_run ("{column}")')


def _pointer() -> models.ForeignKey:
    return models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL,
                             related_name="+", to="runs.attempt")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0030_run_fillfactor"),
    ]

    operations = [
        AddIndexOnline(
            model_name="run",
            index=models.Index(condition=models.Q(("current_attempt__isnull", False)),
                               fields=["current_attempt"], name="run_current_attempt_idx"),
        ),
        AddIndexOnline(
            model_name="run",
            index=models.Index(condition=models.Q(("accepted_attempt__isnull", False)),
                               fields=["accepted_attempt"], name="run_accepted_attempt_idx"),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="run", name="current_attempt", field=_pointer()),
                migrations.AlterField(model_name="run", name="accepted_attempt", field=_pointer()),
            ],
            database_operations=[migrations.RunPython(drop_whole, create_whole, atomic=False)],
        ),
    ]
