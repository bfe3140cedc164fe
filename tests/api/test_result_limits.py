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
