"""A 200 MB export streamed through ctx.output() reaches S3 (a real moto_server) as a multipart
upload while the worker process, a separate process measured by the kernel, stays small.

The bound is on what the job adds to the worker: the kernel's peak resident size while the
worker claims, runs, uploads and completes the job, minus its resident size at rest just
before (about 92 MiB: Django, Celery, boto3's S3 model). An output held in memory adds at
least its own 208 MiB."""

import hashlib
import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from objectstore import object_store_from_url
from runs import authority
from runs.models import Run, RunState
from scheduler_project.clock import authority_now
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from schedules.services import schedule_create
from tests.child_env import database_url_of_test_db
from tests.factories import make_tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_500_000  # examples.orders_csv writes about 62 bytes a row: 218 MB (208 MiB)
MAX_GROWTH_MIB = 100


def probe(env: dict) -> dict:
    """Run tests/workers/memory_probe.py as a worker process; its report."""
    done = subprocess.run([sys.executable, "-m", "tests.workers.memory_probe"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def growth_mib(report: dict) -> float:
    return (report["peakKiB"] - report["atRestKiB"]) / 1024


def test_streamed_output__200_mb_uploads_to_s3_while_the_worker_grows_less_than_100_mb(moto_server):
    bucket_url = f"s3://memory-{uuid.uuid4().hex[:12]}"
    store = object_store_from_url(bucket_url, endpoint_url=moto_server)
    store.ensure_ready()
    tenant = make_tenant("acme")
    body = {"name": "orders", "jobType": "examples.orders_csv", "params": {"rows": ROWS},
            "recurrence": {"kind": "cron", "cron": "0 6 * * *", "timezone": "Europe/Berlin"}}
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert authority.materialize_due().queued == 1

    report = probe(os.environ | {"DATABASE_URL": database_url_of_test_db(), "OBJECT_STORE_URL": bucket_url,
                                 "S3_ENDPOINT_URL": moto_server})

    [(run_id, outcome, error)] = report["outcomes"]
    assert outcome == "succeeded", error
    run = Run.objects.get(id=run_id)
    assert run.state == RunState.SUCCEEDED and run.result_size > 200 * 1024 * 1024
    key = store._s3_key(run.result_key)
    head = store.client.head_object(Bucket=store.bucket, Key=key, VersionId=run.result_version_id, PartNumber=1)
    assert head["PartsCount"] >= 25  # a multipart upload of 8 MiB parts
    digest = hashlib.sha256()
    body = store.client.get_object(Bucket=store.bucket, Key=key, VersionId=run.result_version_id)["Body"]
    for chunk in body.iter_chunks(8 * 1024 * 1024):
        digest.update(chunk)
    assert run.result_checksum == "sha256:" + digest.hexdigest()
    print(f"worker at rest {report['atRestKiB'] / 1024:.0f} MiB, "
          f"peak while it ran the job {report['peakKiB'] / 1024:.0f} MiB, "
          f"growth {growth_mib(report):.0f} MiB for a {run.result_size / 2**20:.0f} MiB output")
    assert growth_mib(report) < MAX_GROWTH_MIB


def test_memory_probe__sees_memory_a_job_holds():
    report = probe(os.environ | {"DATABASE_URL": database_url_of_test_db(), "PROBE_HOLD_MB": "150"})

    assert growth_mib(report) >= 140
