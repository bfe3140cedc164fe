"""Tenants may run exact Celery task names through the `celery.task` job type (create_tenant
--celery-tasks); django-celery-beat rows imported by `manage.py import_beat` are remembered."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0006_schedulerevision_author_kind'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='celery_tasks',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.CreateModel(
            name='BeatImport',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('periodic_task_name', models.CharField(max_length=200)),
                ('periodic_task_id', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('schedule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='schedules.schedule')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='beat_imports', to='schedules.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'periodic_task_name'), name='beatimport_unique')],
            },
        ),
    ]
