"""Narrower and new indexes on runs, built CONCURRENTLY on PostgreSQL (a live runs table is
large): each replacement exists before the index it replaces is dropped."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0003_drop_pattern_ops_indexes'),
        ('schedules', '0001_initial'),
    ]

    operations = [
        AddIndexOnline(
            model_name='run',
            index=models.Index(
                condition=models.Q(('pending_reason__in', ['not_due', 'retry']), ('state', 'pending')),
                fields=['due_at'],
                name='run_promotable_idx',
            ),
        ),
        RemoveIndexOnline(model_name='run', name='run_pending_idx'),
        AddIndexOnline(
            model_name='run',
            index=models.Index(
                condition=models.Q(('finished_at__isnull', False)), fields=['finished_at'], name='run_ended_idx'
            ),
        ),
        RemoveIndexOnline(model_name='run', name='run_finished_idx'),
        AddIndexOnline(
            model_name='run',
            index=models.Index(
                condition=models.Q(('state__in', ['pending', 'queued', 'running'])),
                fields=['schedule', 'scheduled_at', 'id'],
                name='run_active_idx',
            ),
        ),
    ]
