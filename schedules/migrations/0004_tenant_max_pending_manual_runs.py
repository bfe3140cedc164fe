"""A per-tenant limit on manual runs waiting to be claimed (create_tenant --max-pending-manual-runs)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0003_tenant_max_emails_per_day'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='max_pending_manual_runs',
            field=models.PositiveIntegerField(default=1000),
        ),
    ]
