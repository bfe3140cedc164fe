"""The console's state filter over a tenant's runs and its expired-lease figure; built
CONCURRENTLY on PostgreSQL: live runs and attempts tables are large."""

from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0015_scanner_directory'),
    ]

    operations = [
        AddIndexOnline(
            model_name='run',
            index=models.Index(fields=['tenant', 'state', '-scheduled_at', '-id'], name='run_tenant_state_idx'),
        ),
        AddIndexOnline(
            model_name='attempt',
            index=models.Index(condition=models.Q(('state', 'expired')), fields=['finished_at'], name='attempt_expired_idx'),
        ),
    ]
