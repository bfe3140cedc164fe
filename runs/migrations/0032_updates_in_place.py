"""An attempt's end and a dispatch intent's relay lease are written in their page (HOT
updates), not as a new entry in each of the table's indexes.

The index of expired leases (the console's count of the last hour's) was on `finished_at`
where `state = 'expired'`: both columns change when any attempt ends, so every end wrote a
new version into all four of the attempts' indexes. It now reads `expired_at`, which only
the sweep writes; an attempt's end and its heartbeats change no indexed column. A relay's
lease (`relay_until`, `publish_attempts`) never did, but found no room in its page.

`runs_attempt` and `runs_outbox` keep half of each page free (fillfactor 50): their rows are
small (some 200 bytes, twenty a page), all of a page's rows are written within the same
second, and a claim waiting on its tenant's lock holds back the pruning of old versions, so
each row's next version needs room of its own. Measured (BENCHMARKS.md, "Attempts and
dispatch intents rewritten in their pages"): at fillfactor 80, 70, 60 and 50, 69 %, 74 %,
83 % and 100 % of a burst's attempt ends were HOT. The cost is history's: pages written from
now on hold half the rows they did.

Online on PostgreSQL: the new column is nullable (no rewrite); the attempts that expired
before it get `expired_at = finished_at`, read through the old index, a batch per
transaction, before the new index is built CONCURRENTLY and the old one dropped
CONCURRENTLY; the fillfactor takes a SHARE UPDATE EXCLUSIVE lock (readers and writers go on)
and rewrites nothing. A sweep of the previous release that expires an attempt between the
copy and its own replacement leaves `expired_at` empty: that attempt is missing from the
console's count of the hour, nothing else."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, Fillfactor, RemoveIndexOnline

BATCH = 10_000


def copy_expiries(apps, schema_editor):
    """expired_at = finished_at for the attempts already expired, a batch per transaction."""
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                "UPDATE runs_attempt SET expired_at = finished_at WHERE id IN ("
                "  SELECT id FROM runs_attempt WHERE state = 'expired' AND expired_at IS NULL"
                "  AND finished_at IS NOT NULL LIMIT %s)",
                [BATCH],
            )
            if cursor.rowcount < BATCH:
                return


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0031_run_attempt_pointer_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="attempt",
            name="expired_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(copy_expiries, migrations.RunPython.noop, atomic=False),
        AddIndexOnline(
            model_name="attempt",
            index=models.Index(condition=models.Q(("expired_at__isnull", False)), fields=["expired_at"],
                               name="attempt_expired_at_idx"),
        ),
        RemoveIndexOnline(model_name="attempt", name="attempt_expired_idx"),
        Fillfactor("runs_attempt", 50),
        Fillfactor("runs_outbox", 50),
    ]
