"""Backfilled instants wait as pending (reason backfill) until their release; their partial
index is built CONCURRENTLY on PostgreSQL: a live runs table is large."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0013_worker_slots'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='pending_reason',
            field=models.CharField(blank=True, choices=[('', 'None'), ('not_due', 'Not Due'), ('overlap', 'Overlap'), ('retry', 'Retry'), ('backfill', 'Backfill')], default='', max_length=8),
        ),
        AddIndexOnline(
            model_name='run',
            index=models.Index(condition=models.Q(('pending_reason', 'backfill'), ('state', 'pending')), fields=['schedule', 'scheduled_at'], name='run_backfill_idx'),
        ),
    ]
