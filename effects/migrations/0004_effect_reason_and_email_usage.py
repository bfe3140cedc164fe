"""Why an effect failed without a request (egress_denied, quota_exceeded), and the per-tenant
daily count of email recipients its cap is checked against."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('effects', '0003_claim_indexes'),
        ('schedules', '0003_tenant_max_emails_per_day'),
    ]

    operations = [
        migrations.AddField(
            model_name='effectintent',
            name='reason',
            field=models.CharField(blank=True, default='', max_length=40),
        ),
        migrations.CreateModel(
            name='EmailUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('recipients', models.PositiveIntegerField(default=0)),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='schedules.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'day'), name='emailusage_tenant_day_unique')],
            },
        ),
    ]
