"""Limits on results through the worker API: one size cap for every path (RESULT_MAX_BYTES;
the in-process paths are in tests/workers/test_job_context.py)."""

import pytest

from runs.models import StoredObject
from tests.api.conftest import assert_error, claim

pytestmark = pytest.mark.usefixtures("file_objects")


def upload(worker_client, claimed, data: bytes, **extra):
    path = f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result?fence={claimed['fence']}"
    return worker_client.put(path, data=data, content_type="text/csv", **extra)


def test_upload__past_result_max_bytes_is_400_and_stores_nothing(worker_client, queued_run, settings):
    settings.RESULT_MAX_BYTES = 10
    claimed = claim(worker_client)
    error = assert_error(upload(worker_client, claimed, b"x" * 11), 400, "invalid_request")
    assert error["details"] == {"maxBytes": 10}
    assert "RESULT_MAX_BYTES" in error["message"]
    assert not StoredObject.objects.exists()
    assert upload(worker_client, claimed, b"x" * 10).status_code == 201


def test_upload__a_declared_length_past_the_cap_is_refused_before_the_body_is_read(worker_client, queued_run,
                                                                                 settings):
    settings.RESULT_MAX_BYTES = 10
    claimed = claim(worker_client)
    error = assert_error(upload(worker_client, claimed, b"x", CONTENT_LENGTH="1000000000"), 400, "invalid_request")
    assert error["details"] == {"maxBytes": 10}


def test_upload__past_the_tenant_s_stored_bytes_quota_is_429(worker_client, tenant, client):
    from runs.retention import count_stored_bytes
    from tests.api.conftest import create_schedule, run_once

    tenant.max_stored_bytes = 10
    tenant.save()
    schedule = create_schedule(client, overlapPolicy="allow")["scheduleId"]
    run_once(client, schedule)
    run_once(client, schedule)
    first, second = claim(worker_client), claim(worker_client)
    assert upload(worker_client, first, b"x" * 10).status_code == 201
    assert upload(worker_client, second, b"y").status_code == 201  # not counted yet: cleanup counts
    count_stored_bytes()
    run_once(client, schedule)
    third = claim(worker_client)
    error = assert_error(upload(worker_client, third, b"z"), 429, "quota_exceeded")
    assert error["details"] == {"quota": "maxStoredBytes", "limit": 10, "storedBytes": 11}
    assert not StoredObject.objects.filter(run_id=third["runId"]).exists()
