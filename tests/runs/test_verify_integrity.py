"""`manage.py verify_integrity`: each invariant, broken on purpose, is reported, and the
command fails; a sound database (retired results included) passes."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from objectstore import get_object_store
from runs.integrity import verify_integrity
from runs.models import ObjectState, Outbox, Run, RunState, SkipReason, StoredObject
from kernel.clock import authority_now
from tests.authority_steps import REPORT, complete_success, create_schedule, materialize_one, stage, start_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


@pytest.fixture
def system(tenant):
    """A succeeded run with its result in the store, and a queued run of another schedule."""
    running = start_run(create_schedule(tenant, name="report"))
    succeeded = complete_success(running.id, running.current_attempt_id, running.fence, stage(running, REPORT))
    queued = materialize_one(create_schedule(tenant, name="queued"))
    return succeeded, queued


def violations() -> dict[str, list[str]]:
    """Invariant -> examples, for every violated invariant."""
    _, checks = verify_integrity()
    return {check.invariant: check.examples for check in checks if not check.ok}


def verify_command(*args) -> tuple[dict, str]:
    out = StringIO()
    try:
        call_command("verify_integrity", "--json", *args, stdout=out)
        error = ""
    except CommandError as exc:
        error = str(exc)
    return json.loads(out.getvalue()), error


@pytest.mark.django_db(transaction=True)  # the command's own read-only snapshot, as in production
def test_verify__sound_database__every_invariant_holds(system):
    report, error = verify_command()

    assert error == ""
    assert {check["invariant"]: check["violations"] for check in report["checks"]} == {
        "one occurrence per (schedule, instant)": 0,
        "one canonical result per succeeded run": 0,
        "every canonical result exists in the object store": 0,
        "no retained result's object is marked deleted": 0,
        "every queued run has a dispatch outbox row": 0,
        "a run's fence is its newest attempt's": 0,
        "a run has finished_at exactly when its state is terminal": 0,
    }
    assert report["found"]["runs.succeeded"] == 1 and report["found"]["runs.queued"] == 1
    assert all(check["checked"] >= 1 for check in report["checks"])


def test_verify__second_occurrence_of_an_instant__reported_and_command_fails(system):
    _, queued = system
    with connection.cursor() as cursor:  # what a restore that lost the unique index allows
        cursor.execute("DROP INDEX run_one_per_instant")
    Run.objects.create(**{**_columns(queued), "id": "run_duplicate", "state": RunState.SKIPPED,
                          "skip_reason": SkipReason.MISFIRE, "finished_at": queued.scheduled_at})

    report, error = verify_command()

    assert "1 of 7 invariants violated" in error
    assert violations() == {"one occurrence per (schedule, instant)": [
        f"{queued.schedule_id} @ {queued.scheduled_at.isoformat()} x2"]}
    assert report["checks"][0]["violations"] == 1


def test_verify__occurrence_inside_a_skipped_range__reported(system):
    _, queued = system
    Run.objects.create(**{
        **_columns(queued), "id": "run_range", "state": RunState.SKIPPED, "skip_reason": SkipReason.MISFIRE,
        "scheduled_at": queued.scheduled_at - timedelta(days=1), "skipped_count": 3,
        "skipped_through": queued.scheduled_at + timedelta(days=1), "finished_at": queued.scheduled_at,
    })

    assert violations() == {"one occurrence per (schedule, instant)": [
        f"{queued.id} lies inside a skipped range of its schedule"]}


def test_verify__result_pointer_without_its_referenced_object__reported(system):
    succeeded, _ = system
    Run.objects.filter(id=succeeded.id).update(result_version_id="another-version")

    assert violations() == {"one canonical result per succeeded run": [
        f"{succeeded.id}: no referenced object matches its result pointer and accepted attempt"]}


def test_verify__referenced_object_of_a_run_that_did_not_succeed__reported(system):
    succeeded, _ = system
    Run.objects.filter(id=succeeded.id).update(state=RunState.FAILED)

    found = violations()
    assert list(found) == ["one canonical result per succeeded run"]
    assert found["one canonical result per succeeded run"] == [
        f"{succeeded.result_key} is referenced by {succeeded.id}, which is failed"]


def test_verify__canonical_object_missing_from_the_store__reported(system):
    succeeded, _ = system
    get_object_store().delete(succeeded.result_key, succeeded.result_version_id)

    assert violations() == {"every canonical result exists in the object store": [
        f"{succeeded.result_key}@{succeeded.result_version_id} missing from the store"]}
    assert verify_command("--skip-store")[1] == ""


def test_verify__store_holds_another_checksum__reported(system):
    succeeded, _ = system
    altered = "sha256:" + "0" * 64
    Run.objects.filter(id=succeeded.id).update(result_checksum=altered)
    StoredObject.objects.filter(key=succeeded.result_key).update(checksum=altered)

    assert violations() == {"every canonical result exists in the object store": [
        f"{succeeded.result_key}@{succeeded.result_version_id}: the store has {succeeded.result_checksum}, "
        f"the database {altered}"]}


def test_verify__retained_result_marked_deleted__reported(system):
    succeeded, _ = system
    StoredObject.objects.filter(key=succeeded.result_key).update(state=ObjectState.DELETED)

    found = violations()
    assert found["no retained result's object is marked deleted"] == [
        f"{succeeded.result_key} (deleted) is the retained result of {succeeded.id}"]


def test_verify__result_past_retention_deleted__not_a_violation(system, settings):
    succeeded, _ = system
    StoredObject.objects.filter(key=succeeded.result_key).update(state=ObjectState.DELETED)
    get_object_store().delete(succeeded.result_key, succeeded.result_version_id)
    Run.objects.filter(id=succeeded.id).update(
        finished_at=authority_now() - timedelta(days=settings.OBJECT_RETENTION_DAYS + 1))

    assert violations() == {}


def test_verify__queued_run_without_a_dispatch_row__reported(system):
    _, queued = system
    Outbox.objects.filter(run=queued).delete()

    assert violations() == {"every queued run has a dispatch outbox row": [
        f"{queued.id} is queued with no unprocessed dispatch row"]}


def test_verify__run_fence_ahead_of_its_attempts__reported(system):
    succeeded, _ = system
    Run.objects.filter(id=succeeded.id).update(fence=succeeded.fence + 3)

    assert violations() == {"a run's fence is its newest attempt's": [
        f"{succeeded.id}: fence {succeeded.fence + 3}, newest attempt fence {succeeded.fence}, "
        f"attempt_count 1 of 1 attempts"]}


def test_verify__finished_at_out_of_step_with_the_state__reported(system):
    succeeded, queued = system
    Run.objects.filter(id=succeeded.id).update(finished_at=None)
    Run.objects.filter(id=queued.id).update(finished_at=succeeded.finished_at)

    assert violations() == {"a run has finished_at exactly when its state is terminal": sorted([
        f"{succeeded.id} is succeeded with finished_at None",
        f"{queued.id} is queued with finished_at {succeeded.finished_at}"])}


def _columns(run: Run) -> dict:
    """The run's columns, for a raw copy of it."""
    return {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}


def test_command__warns_of_the_servers_settings_as_migrate_does():
    """Run by an operator (not through call_command, which skips system checks), the command
    runs the database's checks too: after a restore, this machine's shared_buffers (128 MB)
    is warned about on stderr, and the report and exit status do not change."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_bytes(current_setting('shared_buffers')) < 1024 ^ 3")
        small = cursor.fetchone()[0]
    out, err = StringIO(), StringIO()
    call_command("verify_integrity", "--skip-store", "--json", skip_checks=False, stdout=out, stderr=err)
    assert json.loads(out.getvalue())["found"]["runs"] == 0
    assert ("runs.W002" in err.getvalue()) == small
