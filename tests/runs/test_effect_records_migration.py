"""runs.0029 and effects.0008 move the effect intents and their deliveries from the effects app
to runs in Django's state only: the rows stay where they are, and the content types move, so
an admin permission granted on them is still granted after the move, and again after going
back."""

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import EffectIntent
from tests.authority_steps import succeeded_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]

BEFORE = [("runs", "0028_attempt_run_index_diet"), ("effects", "0007_validate_run_or_alert")]


def migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)


def granted(user_id: int) -> set[str]:
    user = User.objects.get(id=user_id)  # a fresh instance: permissions are cached per instance
    return {perm for perm in user.get_all_permissions() if perm.endswith("effectintent")}


def test_move__keeps_rows_and_permissions_both_ways(tenant):
    succeeded_run(tenant, effects={"email": {"to": ["ops@example.com"]}})
    intents = set(EffectIntent.objects.values_list("id", flat=True))
    assert intents
    user = User.objects.create_user("auditor")
    user.user_permissions.add(Permission.objects.get(codename="view_effectintent"))
    assert granted(user.id) == {"runs.view_effectintent"}

    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id FROM effects_effectintent")
            assert {row[0] for row in cursor.fetchall()} == intents
        assert granted(user.id) == {"effects.view_effectintent"}
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert set(EffectIntent.objects.values_list("id", flat=True)) == intents
    assert granted(user.id) == {"runs.view_effectintent"}
