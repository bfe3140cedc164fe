"""The effect intents and their deliveries become the authority's records (runs.models): the
authority writes them in its own transactions (a canonical result's intents), and the effects
app, above runs, delivers them. Their tables keep their names (effects_effectintent,
effects_effectdelivery), so nothing changes in the database: Django's state only."""

import django.db.models.deletion
from django.db import migrations, models

import runs.models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0028_attempt_run_index_diet'),
        ('effects', '0007_validate_run_or_alert'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='EffectIntent',
                fields=[
                    ('id', models.CharField(default=runs.models.new_effect_id, editable=False, max_length=40, primary_key=True, serialize=False)),
                    ('action', models.CharField(max_length=120, unique=True)),
                    ('alert', models.JSONField(blank=True, null=True)),
                    ('kind', models.CharField(choices=[('email', 'Email'), ('webhook', 'Webhook')], max_length=10)),
                    ('target', models.JSONField(default=dict)),
                    ('result_key', models.CharField(max_length=500)),
                    ('result_version_id', models.CharField(blank=True, max_length=200, null=True)),
                    ('result_checksum', models.CharField(max_length=71)),
                    ('state', models.CharField(choices=[('pending', 'Pending'), ('sent', 'Sent'), ('uncertain', 'Uncertain'), ('failed', 'Failed'), ('skipped', 'Skipped')], default='pending', max_length=10)),
                    ('external_id', models.CharField(blank=True, default='', max_length=300)),
                    ('delivery_count', models.PositiveIntegerField(default=0)),
                    ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                    ('resolution', models.TextField(blank=True, default='')),
                    ('reason', models.CharField(blank=True, default='', max_length=40)),
                    ('created_at', models.DateTimeField()),
                    ('updated_at', models.DateTimeField()),
                    ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='effect_intents', to='runs.run')),
                ],
                options={
                    'db_table': 'effects_effectintent',
                },
            ),
            migrations.CreateModel(
                name='EffectDelivery',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('number', models.PositiveIntegerField()),
                    ('started_at', models.DateTimeField()),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('outcome', models.CharField(choices=[('pending', 'Pending'), ('sent', 'Sent'), ('uncertain', 'Uncertain'), ('failed', 'Failed'), ('skipped', 'Skipped')], default='pending', max_length=10)),
                    ('external_id', models.CharField(blank=True, default='', max_length=300)),
                    ('detail', models.TextField(blank=True, default='')),
                    ('request', models.JSONField(blank=True, default=dict)),
                    ('intent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='runs.effectintent')),
                ],
                options={
                    'db_table': 'effects_effectdelivery',
                },
            ),
            migrations.AddIndex(
                model_name='effectintent',
                index=models.Index(condition=models.Q(('next_attempt_at__isnull', True), ('state', 'pending')), fields=['created_at', 'id'], name='effect_undated_idx'),
            ),
            migrations.AddIndex(
                model_name='effectintent',
                index=models.Index(condition=models.Q(('next_attempt_at__isnull', False), ('state__in', ['pending', 'uncertain'])), fields=['next_attempt_at', 'created_at', 'id'], name='effect_dated_idx'),
            ),
            migrations.AddIndex(
                model_name='effectintent',
                index=models.Index(condition=models.Q(('state__in', ['pending', 'uncertain'])), fields=['state', 'created_at', 'id'], name='effect_open_idx'),
            ),
            migrations.AddConstraint(
                model_name='effectintent',
                constraint=models.CheckConstraint(condition=models.Q(('run__isnull', False), ('alert__isnull', False), _connector='OR'), name='effect_run_or_alert'),
            ),
            migrations.AddConstraint(
                model_name='effectdelivery',
                constraint=models.UniqueConstraint(fields=('intent', 'number'), name='effectdelivery_number_unique'),
            ),
        ]),
    ]
