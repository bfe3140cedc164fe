"""The manual-run quota's count (unclaimed manual runs per tenant) gets its own partial index,
built CONCURRENTLY on PostgreSQL: a live runs table is large."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0006_drop_effect_outbox_rows'),
        ('schedules', '0004_tenant_max_pending_manual_runs'),
    ]

    operations = [
        AddIndexOnline(
            model_name='run',
            index=models.Index(
                condition=models.Q(('state__in', ['pending', 'queued']), ('trigger', 'manual')),
                fields=['tenant'],
                name='run_manual_outstanding_idx',
            ),
        ),
    ]
