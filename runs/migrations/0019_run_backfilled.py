"""Backfilled runs are marked (a column with a database default, no table rewrite) so that
they count, like manual runs, against the tenant's quota of work waiting to be claimed; the
quota's index covers both, built CONCURRENTLY on PostgreSQL before the manual-only one is
dropped. Backfilled runs created before this migration stay unmarked (scheduled occurrences
to the quota and the statistics, as they were)."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0018_history_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='backfilled',
            field=models.BooleanField(db_default=False, default=False),
        ),
        AddIndexOnline(
            model_name='run',
            index=models.Index(
                condition=(models.Q(('trigger', 'manual')) | models.Q(('backfilled', True)))
                & models.Q(('state__in', ['pending', 'queued'])),
                fields=['tenant'], name='run_requested_waiting_idx',
            ),
        ),
        RemoveIndexOnline(model_name='run', name='run_manual_outstanding_idx'),
    ]
