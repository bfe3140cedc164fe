"""Result links and result bytes: links come from PUBLIC_BASE_URL only, never the Host
header; the bytes are always a sandboxed attachment, whatever type the worker stored."""

import json
import os
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from tests.api.conftest import assert_error, claim
from tests.api.test_worker_api import complete_success, upload
from tests.factories import api_client

pytestmark = pytest.mark.django_db

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTILE = b"<html><script>fetch('/admin/').then(r => r.text()).then(steal)</script></html>"


def published(worker_client, data=HOSTILE, content_type="text/html"):
    claimed = claim(worker_client)
    done = complete_success(worker_client, claimed, upload(worker_client, claimed, data, content_type).json())
    assert done.status_code == 200, done.content
    return claimed["runId"]


def test_result__html_is_served_as_a_sandboxed_attachment(client, worker_client, queued_run):
    run_id = published(worker_client)
    url = urlsplit(client.get(f"/api/v1/runs/{run_id}/result").json()["url"])

    download = api_client().get(url.path)

    assert download.status_code == 200
    assert b"".join(download.streaming_content) == HOSTILE
    assert download["Content-Disposition"].startswith("attachment")
    assert download["X-Content-Type-Options"] == "nosniff"
    assert download["Content-Security-Policy"] == "sandbox"


def test_result__link_is_built_from_public_base_url_never_the_host_header(client, worker_client, queued_run,
                                                                          settings):
    settings.PUBLIC_BASE_URL = "https://scheduler.example.com"
    run_id = published(worker_client)

    link = client.get(f"/api/v1/runs/{run_id}/result", HTTP_HOST="evil.example").json()["url"]

    assert link.startswith("https://scheduler.example.com/api/v1/objects/")
    assert api_client().get(urlsplit(link).path).status_code == 200


def test_allowed_hosts__a_foreign_host_header_is_refused(client, settings):
    settings.ALLOWED_HOSTS = ["scheduler.example.com"]
    assert client.get("/api/v1/schedules", HTTP_HOST="scheduler.example.com").status_code == 200
    assert_error(client.get("/api/v1/schedules", HTTP_HOST="evil.example"), 400, "invalid_request")


@pytest.mark.parametrize("env, expected", [
    ({"PUBLIC_BASE_URL": "https://scheduler.example.com:8443/"}, ["scheduler.example.com"]),
    ({"PUBLIC_BASE_URL": "http://[2001:db8::5]:8000"}, ["[2001:db8::5]"]),
    ({"PUBLIC_BASE_URL": "https://scheduler.example.com", "ALLOWED_HOSTS": "a.example, b.example"},
     ["a.example", "b.example"]),
    ({}, ["*"]),
])
def test_allowed_hosts__default_to_the_public_base_urls_host(env, expected):
    """Read from a fresh process: settings are computed once, at start."""
    base = {k: v for k, v in os.environ.items() if k not in ("PUBLIC_BASE_URL", "ALLOWED_HOSTS")}
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps([settings.ALLOWED_HOSTS, settings.PUBLIC_BASE_URL]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env, "DJANGO_SETTINGS_MODULE":
                         "scheduler_project.settings"}, check=True, capture_output=True, text=True).stdout
    hosts, base_url = json.loads(out.strip().splitlines()[-1])
    assert hosts == expected
    assert not base_url.endswith("/")


def _upload_named(worker_client, claimed, filename):
    path = (
        f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result"
        f"?fence={claimed['fence']}&filename={filename}"
    )
    return worker_client.put(path, data=b"id,total\n1,10\n", content_type="text/csv")


def test_result__download_carries_the_jobs_file_name(client, worker_client, queued_run):
    claimed = claim(worker_client)
    uploaded = _upload_named(worker_client, claimed, "invoices-ACME-2026-12-02.csv")
    assert uploaded.status_code == 201, uploaded.content
    assert complete_success(worker_client, claimed, uploaded.json()).status_code == 200
    url = urlsplit(client.get(f"/api/v1/runs/{claimed['runId']}/result").json()["url"])
    download = api_client().get(url.path)
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="invoices-ACME-2026-12-02.csv"'


def test_result__without_a_file_name_downloads_as_result(client, worker_client, queued_run):
    run_id = published(worker_client)
    url = urlsplit(client.get(f"/api/v1/runs/{run_id}/result").json()["url"])
    assert api_client().get(url.path)["Content-Disposition"] == 'attachment; filename="result"'


@pytest.mark.parametrize("filename", ["..%2Fsecret.csv", "a%22b.csv", "x%0Ay.csv", "x" * 201])
def test_upload__a_file_name_that_is_not_plain_is_invalid(worker_client, queued_run, filename):
    claimed = claim(worker_client)
    assert_error(_upload_named(worker_client, claimed, filename), 400, "invalid_request", field="filename")


def test_stage_result__in_process_records_the_file_name(worker_client, queued_run):
    from workers.uploads import stage_result
    from runs.models import StoredObject

    claimed = claim(worker_client)
    stored = stage_result(
        run_id=claimed["runId"], attempt_id=claimed["attemptId"], fence=claimed["fence"],
        data=b"x", content_type="text/plain", filename="report.txt",
    )
    assert StoredObject.objects.get(id=stored.id).filename == "report.txt"


def test_upload__the_same_bytes_under_another_name_or_type_is_409(client, worker_client, queued_run):
    """A staged object is immutable in its name and type too, not only in its bytes."""
    claimed = claim(worker_client)
    first = _upload_named(worker_client, claimed, "first.csv")
    assert first.status_code == 201, first.content
    renamed = _upload_named(worker_client, claimed, "second.html")
    assert_error(renamed, 409, "invalid_state")
    path = f"/api/v1/worker/runs/{claimed['runId']}/attempts/{claimed['attemptId']}/result?fence={claimed['fence']}"
    retyped = worker_client.put(f"{path}&filename=first.csv", data=b"id,total\n1,10\n", content_type="text/html")
    assert_error(retyped, 409, "invalid_state")

    repeated = _upload_named(worker_client, claimed, "first.csv")  # an exact repeat stays idempotent
    assert repeated.status_code == 201 and repeated.json() == first.json()
    assert complete_success(worker_client, claimed, first.json()).status_code == 200
    download = api_client().get(urlsplit(client.get(f"/api/v1/runs/{claimed['runId']}/result").json()["url"]).path)
    assert download["Content-Disposition"] == 'attachment; filename="first.csv"'
    assert download["Content-Type"] == "text/csv"
