"""The effect intents and their deliveries move to runs (runs.0029): Django's state only, their
tables stay. Their content types (and with them the admin permissions granted on them) move
along."""

import django.db.models.deletion
from django.db import migrations, models

MOVED = ("effectintent", "effectdelivery")


def move_content_types(source: str, target: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        for model in MOVED:
            ContentType.objects.filter(app_label=target, model=model).delete()  # made by a migrate that stopped between
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)
    return move


class Migration(migrations.Migration):

    dependencies = [
        ('effects', '0007_validate_run_or_alert'),
        ('runs', '0029_effect_records'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='incidentnotice',
                name='intent',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notices', to='runs.effectintent'),
            ),
            migrations.DeleteModel(name='EffectDelivery'),
            migrations.DeleteModel(name='EffectIntent'),
        ]),
        migrations.RunPython(move_content_types("effects", "runs"), move_content_types("runs", "effects")),
    ]
