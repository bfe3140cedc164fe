"""The two probes of the delivery claim get their own partial indexes, built CONCURRENTLY on
PostgreSQL before the index they replace is dropped."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('effects', '0002_initial'),
    ]

    operations = [
        AddIndexOnline(
            model_name='effectintent',
            index=models.Index(
                condition=models.Q(('next_attempt_at__isnull', True), ('state', 'pending')),
                fields=['created_at', 'id'],
                name='effect_undated_idx',
            ),
        ),
        AddIndexOnline(
            model_name='effectintent',
            index=models.Index(
                condition=models.Q(('next_attempt_at__isnull', False), ('state__in', ['pending', 'uncertain'])),
                fields=['next_attempt_at', 'created_at', 'id'],
                name='effect_dated_idx',
            ),
        ),
        RemoveIndexOnline(model_name='effectintent', name='effect_due_idx'),
    ]
