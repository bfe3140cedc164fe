from django.db import migrations, models


def delete_effect_rows(apps, schema_editor):
    # Effect intents are claimed from their own table; these rows were written and never read.
    apps.get_model("runs", "Outbox").objects.filter(kind="effect").delete()


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0005_drop_outbox_payload"),
    ]

    operations = [
        migrations.RunPython(delete_effect_rows, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="outbox",
            name="kind",
            field=models.CharField(choices=[("dispatch", "Dispatch")], max_length=10),
        ),
    ]
