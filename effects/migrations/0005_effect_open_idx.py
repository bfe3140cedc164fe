"""Open effect intents (pending, uncertain) by state and age: the scheduler_effects gauge and
the console's uncertain queue. Built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('effects', '0004_effect_reason_and_email_usage'),
    ]

    operations = [
        AddIndexOnline(
            model_name='effectintent',
            index=models.Index(
                condition=models.Q(('state__in', ['pending', 'uncertain'])),
                fields=['state', 'created_at', 'id'],
                name='effect_open_idx',
            ),
        ),
    ]
