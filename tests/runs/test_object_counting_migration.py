"""runs.0033 swaps the registry's index of objects to count (from recorded uploads to every
object not counted yet) and gives the registry a fillfactor, both ways, online: objects
registered, recorded or published before it are counted after it exactly once."""

import pytest
from django.db import connection

from runs import authority
from runs.models import StoredObject
from runs.retention import count_stored_bytes
from tests.authority_steps import publish, report_schedule, stage, start_run
from tests.runs.test_history_migration import migrate
from tests.runs.test_storage_quota import stored_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("file_objects")]

BEFORE = ("runs", "0032_updates_in_place")


def registry() -> tuple[dict[str, bool], list | None]:
    """The registry's partial indexes (name: valid) and its storage options."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
                       " WHERE i.indrelid = 'runs_storedobject'::regclass AND i.indpred IS NOT NULL")
        partial = dict(cursor.fetchall())
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_storedobject'")
        return partial, cursor.fetchone()[0]


def test_objects_from_before_the_migration__counted_once_after_it(tenant):
    schedules = [report_schedule(tenant, name=name) for name in ("published", "recorded", "registered")]
    migrate(BEFORE)
    try:
        assert registry() == ({"object_one_canonical_per_run": True, "object_uncounted_idx": True}, None)
        publish(published := start_run(schedules[0]), stage(published, b"p" * 10))
        stage(start_run(schedules[1]), b"s" * 3)  # recorded, not published
        registered = start_run(schedules[2])  # registered, its upload not recorded
        upload = authority.Upload(registered.id, registered.current_attempt_id, registered.fence, b"r" * 5, "text/csv")
        assert authority.stage_register([upload])[1] == [0]
    finally:
        migrate()

    assert registry() == ({"object_one_canonical_per_run": True, "object_to_count_idx": True}, ["fillfactor=65"])
    assert count_stored_bytes().objects_counted == 2 and stored_bytes(tenant) == 13
    stage(registered, b"r" * 5)
    assert count_stored_bytes().objects_counted == 1 and stored_bytes(tenant) == 18
    assert not StoredObject.objects.filter(counted=False).exists()
