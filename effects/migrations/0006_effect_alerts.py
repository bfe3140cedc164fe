"""Alerts are effect intents without a run (effects.alerts).

On PostgreSQL neither change of effects_effectintent reads its rows or touches runs_run: the
run's foreign key is not dropped and added again (Django's AlterField would, and validating
it again holds a lock on runs_run, blocking every run's insert, for a scan of every intent);
the column only drops NOT NULL. The check is added NOT VALID (every existing intent has a
run), and 0007 validates it without blocking writers. On SQLite, Django's own operations."""

import django.db.models.deletion
from django.db import migrations, models

from kernel.migration_ops import OnPostgres


def forget_alerts(apps, schema_editor):
    """Backwards: an intent without a run cannot stay (run_id becomes required again)."""
    apps.get_model("effects", "EffectIntent").objects.filter(run__isnull=True).delete()
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the table is altered next, in this transaction


class Migration(migrations.Migration):

    dependencies = [
        ('effects', '0005_effect_open_idx'),
        ('runs', '0025_incidents'),
    ]

    operations = [
        migrations.CreateModel(
            name='IncidentNotice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(choices=[('opened', 'Opened'), ('resolved', 'Resolved')], max_length=8)),
                ('target', models.CharField(choices=[('email', 'Email'), ('webhook', 'Webhook')], max_length=10)),
            ],
        ),
        migrations.AddField(
            model_name='effectintent',
            name='alert',
            field=models.JSONField(blank=True, null=True),
        ),
        OnPostgres(
            migrations.AlterField(
                model_name='effectintent',
                name='run',
                field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='effect_intents', to='runs.run'),
            ),
            ["ALTER TABLE effects_effectintent ALTER COLUMN run_id DROP NOT NULL"],
            ["ALTER TABLE effects_effectintent ALTER COLUMN run_id SET NOT NULL"],
        ),
        OnPostgres(
            migrations.AddConstraint(
                model_name='effectintent',
                constraint=models.CheckConstraint(condition=models.Q(('run__isnull', False), ('alert__isnull', False), _connector='OR'), name='effect_run_or_alert'),
            ),
            ["ALTER TABLE effects_effectintent ADD CONSTRAINT effect_run_or_alert"
             " CHECK (run_id IS NOT NULL OR alert IS NOT NULL) NOT VALID"],
            ["ALTER TABLE effects_effectintent DROP CONSTRAINT effect_run_or_alert"],
        ),
        migrations.AddField(
            model_name='incidentnotice',
            name='incident',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='notices', to='runs.incident'),
        ),
        migrations.AddField(
            model_name='incidentnotice',
            name='intent',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notices', to='effects.effectintent'),
        ),
        migrations.AddConstraint(
            model_name='incidentnotice',
            constraint=models.UniqueConstraint(fields=('incident', 'event', 'target'), name='incidentnotice_unique'),
        ),
        # Last, so that going back it runs first.
        migrations.RunPython(migrations.RunPython.noop, forget_alerts),
    ]
