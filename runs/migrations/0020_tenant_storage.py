"""The bytes each tenant's results hold (TenantStorage, against Tenant.max_stored_bytes),
counted by cleanup from the registry: a column with a database default (no table rewrite)
and a partial index of the recorded objects not counted yet, built CONCURRENTLY on
PostgreSQL. Objects stored before this migration are all uncounted: cleanup counts them in
over its next passes, and until it has, a tenant's figure is low (uploads are refused later,
never wrongly)."""

import django.db.models.deletion
from django.db import migrations, models

from kernel.migration_ops import AddIndexOnline


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('runs', '0019_run_backfilled'),
        ('schedules', '0010_tenant_max_stored_bytes'),
    ]

    operations = [
        migrations.CreateModel(
            name='TenantStorage',
            fields=[
                ('tenant', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='storage', serialize=False, to='schedules.tenant')),
                ('stored_bytes', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.AddField(
            model_name='storedobject',
            name='counted',
            field=models.BooleanField(db_default=False, default=False),
        ),
        AddIndexOnline(
            model_name='storedobject',
            index=models.Index(condition=models.Q(('counted', False), ('size__isnull', False), ('state__in', ['staged', 'referenced'])), fields=['id'], name='object_uncounted_idx'),
        ),
    ]
