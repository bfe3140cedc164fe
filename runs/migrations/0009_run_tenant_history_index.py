"""GET /runs reads a tenant's runs newest first; its index is built CONCURRENTLY on
PostgreSQL: a live runs table is large."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0008_outbox_broker_epoch'),
    ]

    operations = [
        AddIndexOnline(
            model_name='run',
            index=models.Index(fields=['tenant', '-scheduled_at', '-id'], name='run_tenant_history_idx'),
        ),
    ]
