"""An attempt belongs to the worker credential that claimed it; worker tokens may be limited
to resource classes; a repeated completion is answered only for its own attempt and fence."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from prometheus_client import REGISTRY

from tests.api.conftest import assert_error, claim, create_schedule, run_once
from tests.api.test_worker_api import complete_success, fenced, upload
from tests.factories import api_client, make_worker_token

pytestmark = pytest.mark.django_db


def refusals(operation: str) -> float:
    return REGISTRY.get_sample_value("scheduler_worker_credential_refusals_total", {"operation": operation}) or 0.0


@pytest.fixture
def thief():
    return api_client(make_worker_token("worker-2"))


def test_another_workers_token__heartbeat_upload_complete_refused_and_counted(worker_client, thief, queued_run):
    claimed = claim(worker_client, workerId="w1")
    before = {op: refusals(op) for op in ("heartbeat", "stage", "complete")}

    assert_error(thief.post("/api/v1/worker/heartbeat", fenced(claimed)), 403, "forbidden")
    assert_error(upload(thief, claimed), 403, "forbidden")
    assert_error(thief.post("/api/v1/worker/complete", fenced(claimed, outcome="failed", error="x")), 403, "forbidden")

    assert {op: refusals(op) - before[op] for op in before} == {"heartbeat": 1, "stage": 1, "complete": 1}
    # The rightful worker is untouched by any of it.
    assert worker_client.post("/api/v1/worker/heartbeat", fenced(claimed)).status_code == 200
    uploaded = upload(worker_client, claimed).json()
    assert complete_success(worker_client, claimed, uploaded).status_code == 200
    # Nor can another token replay the accepted completion to read the run.
    assert_error(complete_success(thief, claimed, uploaded), 403, "forbidden")


def test_repeated_completion__other_fence_is_stale_same_fence_answers_saved_run(worker_client, queued_run):
    claimed = claim(worker_client, workerId="w1")
    uploaded = upload(worker_client, claimed).json()
    first = complete_success(worker_client, claimed, uploaded)
    assert first.status_code == 200

    again = complete_success(worker_client, claimed, uploaded)
    assert again.status_code == 200 and again.json() == first.json()
    other_fence = dict(claimed, fence=claimed["fence"] + 1)
    assert_error(complete_success(worker_client, other_fence, uploaded), 409, "stale_fence")


def test_token_limited_to_classes__claims_only_within_them(client, queued_run):
    limited = api_client(make_worker_token("short-only", resource_classes=["short"]))
    export = create_schedule(client, name="export", jobType="demo.export", params={"seconds": 0})
    run_once(client, export["scheduleId"])  # a long-class run
    before = refusals("claim")

    assert_error(limited.post("/api/v1/worker/claim", {"resourceClasses": ["long"]}), 403, "forbidden")
    assert_error(limited.post("/api/v1/worker/claim", {"resourceClasses": ["short", "long"]}), 403, "forbidden")
    assert refusals("claim") - before == 2
    claimed = claim(limited)  # no classes named: within its own
    assert claimed["runId"] == queued_run["runId"]
    assert limited.post("/api/v1/worker/claim", {}).status_code == 204  # the long run is not for it


def test_create_worker_token__classes_option():
    out = StringIO()
    call_command("create_worker_token", "batch", "--classes", "long, memory", stdout=out)
    token_id = json.loads(out.getvalue().splitlines()[-1])["workerId"]
    from schedules.models import ApiToken

    assert ApiToken.objects.get(id=token_id).resource_classes == ["long", "memory"]
    with pytest.raises(CommandError, match="unknown resource classes"):
        call_command("create_worker_token", "bad", "--classes", "short,gpu", stdout=StringIO())
