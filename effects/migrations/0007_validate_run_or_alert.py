"""Validates effect_run_or_alert, added NOT VALID by 0006: a scan of the intents under a lock
that lets writers go on (SHARE UPDATE EXCLUSIVE), in a transaction of its own. SQLite
checked it when 0006 added it."""

from django.db import migrations


def validate(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE effects_effectintent VALIDATE CONSTRAINT effect_run_or_alert")


class Migration(migrations.Migration):

    dependencies = [
        ("effects", "0006_effect_alerts"),
    ]

    operations = [
        migrations.RunPython(validate, migrations.RunPython.noop),
    ]
