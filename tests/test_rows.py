"""kernel.rows builds model instances from rows of statements written out without Django's
constructor: each must be what the ORM reads, on PostgreSQL and (tests/runs/
test_embedded_authority.py lists this module) on the embedded SQLite, whose instants,
booleans and JSON come back as text and go through Django's converters."""

import pytest
from django.db.models import signals

from kernel.rows import Rows
from runs import authority
from runs.authority.statements.claim import CANDIDATE, CLAIMED_SCHEDULE
from runs.models import Attempt, EffectIntent, Run
from runs.selectors import _ATTEMPT, _INTENT, _RUN
from schedules.models import ApiToken, Schedule, Tenant
from schedules.selectors import _TENANT, _TOKEN
from tests.authority_steps import create_schedule, expire_lease, start_run

pytestmark = pytest.mark.django_db

EVERY_FIELD = Rows(Run)


def values(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_rows__read_what_the_orm_reads__every_field_converted(tenant):
    run = start_run(create_schedule(tenant))
    expire_lease(run)
    authority.sweep_expired_leases()  # an expired attempt: the run queued again, its instants set
    orm = Run.objects.get(id=run.id)

    [built] = EVERY_FIELD.read(f"SELECT {EVERY_FIELD.columns('r')} FROM runs_run r WHERE r.id = %s", [run.id])

    assert type(built) is Run and values(built) == values(orm)
    assert built.started_at.tzinfo is not None and isinstance(built.payload, dict)
    assert (built._state.adding, built._state.db) == (False, "default")
    assert built.get_deferred_fields() == set()


def test_rows__fields_left_out_are_deferred__read_when_asked(tenant):
    run = start_run(create_schedule(tenant))
    reader = Rows(Run, ["id", "state"], extra=["note_upper"])

    [built] = reader.read("SELECT r.id, r.state, 'X' FROM runs_run r WHERE r.id = %s", [run.id])

    assert (built.id, built.state, built.note_upper) == (run.id, "running", "X")
    assert "fence" in built.get_deferred_fields()
    assert built.fence == run.fence  # loaded from the database on first read
    built.note = "kept"
    built.save(update_fields=["note"])  # an instance like any other: it writes itself back
    assert Run.objects.get(id=run.id).note == "kept"


def test_rows__values_already_converted_are_taken_as_they_are(tenant):
    start_run(create_schedule(tenant))
    names = [field.name for field in EVERY_FIELD.fields]

    built = EVERY_FIELD.build(Run.objects.filter(tenant=tenant).values_list(*names), converted=True)

    assert [values(run) for run in built] == [values(run) for run in Run.objects.filter(tenant=tenant)]


def test_rows__no_model_read_this_way_has_init_signal_receivers():
    """Django's constructor sends pre_init and post_init; kernel.rows does not."""
    readers = [EVERY_FIELD, CANDIDATE, CLAIMED_SCHEDULE, _RUN, _ATTEMPT, _INTENT, _TOKEN, _TENANT]
    models = {reader.model for reader in readers}
    assert models == {Run, Schedule, Attempt, EffectIntent, ApiToken, Tenant}
    for model in models:
        assert not signals.pre_init.has_listeners(model) and not signals.post_init.has_listeners(model), model
