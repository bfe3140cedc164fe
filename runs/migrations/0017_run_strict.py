"""Strict occurrences (of schedules with startDeadlineSeconds): a column with a database
default (no table rewrite), and the claim index that serves them first, built CONCURRENTLY
on PostgreSQL before the old one is dropped."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0016_console_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='strict',
            field=models.BooleanField(db_default=False, default=False),
        ),
        AddIndexOnline(
            model_name='run',
            index=models.Index(condition=models.Q(('state', 'queued')), fields=['tenant', '-strict', 'due_at', 'id'], name='run_claimable_strict_idx'),
        ),
        RemoveIndexOnline(
            model_name='run',
            name='run_claimable_idx',
        ),
    ]
