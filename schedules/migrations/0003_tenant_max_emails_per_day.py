"""A per-tenant cap on email recipients per UTC day (create_tenant --max-emails-per-day)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0002_active_run_and_bucket_constraints'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='max_emails_per_day',
            field=models.PositiveIntegerField(default=1000),
        ),
    ]
