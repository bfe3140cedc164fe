"""Staging survives a database failure between the upload and its record: the retry with the
same bytes adopts the version already written; different bytes are refused (objects are
immutable). Against the file store and a real S3 server (moto_server)."""

import uuid

import pytest

from objectstore import get_object_store
from runs import authority
from workers import uploads
from runs.authority import result_key
from runs.models import ObjectState, StoredObject
from kernel.errors import InvalidState
from tests.authority_steps import create_schedule, start_run

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["file", "s3"])
def object_store(request, settings, tmp_path):
    if request.param == "file":
        settings.OBJECT_STORE_URL = f"file://{tmp_path}/objects"
    else:
        settings.OBJECT_STORE_URL = f"s3://stage-{uuid.uuid4().hex[:12]}/results"
        settings.S3_ENDPOINT_URL = request.getfixturevalue("moto_server")
    get_object_store.cache_clear()
    get_object_store().ensure_ready()
    yield get_object_store()
    get_object_store.cache_clear()


def upload_then_lose_the_database(run, data: bytes):
    """The state a database failure leaves after the upload: the object is written, its
    registry row staged with no version."""
    key = result_key(run.id, run.current_attempt_id)
    obj = uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                               data=data, content_type="text/csv")
    StoredObject.objects.filter(id=obj.id).update(version_id=None, checksum=None, size=None, uploaded_at=None)
    return key, obj.version_id


def test_stage__retry_with_the_same_bytes__adopts_the_written_version(tenant, object_store):
    run = start_run(create_schedule(tenant))
    key, written = upload_then_lose_the_database(run, b"region,total\nus,42\n")

    obj = uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                               data=b"region,total\nus,42\n", content_type="text/csv")

    assert obj.key == key and obj.version_id == written and obj.state == ObjectState.STAGED
    stored = StoredObject.objects.get(id=obj.id)
    assert stored.version_id == written and stored.checksum == object_store.current(key).checksum
    run = authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="succeeded",
                             object_key=obj.key, version_id=obj.version_id, checksum=obj.checksum)
    assert run.result_version_id == written


@pytest.mark.parametrize("data, content_type", [(b"second", "text/csv"), (b"first", "text/html")],
                         ids=["other bytes", "the same bytes of another type"])
def test_stage__retry_with_another_result__refused_and_nothing_recorded(tenant, object_store, data, content_type):
    run = start_run(create_schedule(tenant))
    key, _ = upload_then_lose_the_database(run, b"first")

    with pytest.raises(InvalidState, match="different result"):
        uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                             data=data, content_type=content_type)
    assert StoredObject.objects.get(key=key).version_id is None


def test_stage__a_repeat_recording_the_same_version_first__the_first_request_answers_it_too(object_store,
                                                                                         tenant, monkeypatch):
    """A worker repeats an upload whose answer it lost while the first request still runs:
    the first writes, the repeat adopts that version and records it first. The first request
    then answers the recorded object; it must not delete the version the repeat recorded."""
    from tests.authority_steps import publish

    run = start_run(create_schedule(tenant))
    real = uploads._upload_all
    repeats = []

    def the_repeat_records_first(written):
        versions = real(written)
        monkeypatch.setattr(uploads, "_upload_all", real)
        repeats.append(uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                                            data=b"a,b\n", content_type="text/csv"))
        return versions

    monkeypatch.setattr(uploads, "_upload_all", the_repeat_records_first)
    first = uploads.stage_result(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                                 data=b"a,b\n", content_type="text/csv")

    assert (first.id, first.version_id) == (repeats[0].id, repeats[0].version_id)
    assert object_store.get(first.key, first.version_id) == b"a,b\n"
    assert publish(run, first).state == "succeeded"
