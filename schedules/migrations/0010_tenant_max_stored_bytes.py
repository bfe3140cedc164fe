"""A tenant's quota of bytes held by its results (a column with a database default: no
table rewrite)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0009_shadow_disagreement'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='max_stored_bytes',
            field=models.PositiveBigIntegerField(db_default=10737418240, default=10737418240),
        ),
    ]
