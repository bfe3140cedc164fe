"""A 200 MB export streamed through ctx.output() reaches S3 (a real moto_server) as a multipart
upload while the process that runs the job stays under 100 MB.

That process is the pool process of a real Celery worker started as deployed (prefork, the
`long` queue); the kernel reports its memory: its resident size at rest before the hint
arrives, and its peak resident size (VmHWM, the high-water mark since the pool forked it)
once the run has succeeded. The peak is bounded absolutely, everything the process holds
counted (Django, Celery, psycopg, botocore's S3 client, the job), and so is what the job adds
to the resting worker: an output held in memory would add at least its own 208 MiB."""

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest

from kernel.clock import authority_now
from objectstore import get_object_store
from runs import authority
from runs.models import Outbox, Run, RunState
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from tests.child_env import redis_mode
from tests.e2e.processes import wait_until
from tests.factories import make_tenant
from tests.workers import bridge_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROWS = 3_500_000  # examples.orders_csv writes about 62 bytes a row: 218 MB (208 MiB)
MAX_PEAK_BYTES = 100 * 1000 * 1000  # 100 MB (95.4 MiB)
MAX_GROWTH_MIB = 100


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def pool_process(worker_pid: int) -> int:
    """The one pool process of a `-c 1` prefork worker: where its jobs run."""
    def parent_of(stat: Path) -> int:
        return int(stat.read_text().rpartition(")")[2].split()[1])  # after "pid (comm)": state, ppid

    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if parent_of(stat) == worker_pid:
                children.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            pass
    assert len(children) == 1, children
    return children[0]


def run_in_celery_worker(processes, queue: str, run: Run, **env) -> dict:
    """Start a worker on ``queue``, then hint ``run`` to it; its memory figures (KiB) once the
    run has finished."""
    from scheduler_project.celery import app
    from workers.hint_publisher import publish_hints

    worker = processes.celery_worker("worker", queue, concurrency=1, **env)
    wait_until(lambda: " ready." in processes.log("worker"), timeout=60, message="the Celery worker")
    pool = pool_process(worker.pid)
    at_rest = status_kib(pool, "VmRSS")
    with app.producer_or_acquire() as producer:
        publish_hints([Outbox.objects.get(run_id=run.id)], producer)
    wait_until(lambda: Run.objects.get(id=run.id).state not in (RunState.QUEUED, RunState.RUNNING), timeout=300,
               interval=0.5, message="the run to finish")
    assert pool_process(worker.pid) == pool  # the pool process that was at rest ran the job
    return {"atRestKiB": at_rest, "peakKiB": status_kib(pool, "VmHWM"),
            "workerAtRestKiB": status_kib(worker.pid, "VmRSS")}


def due_run(tenant, body: dict) -> Run:
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert authority.materialize_due().queued == 1
    return Run.objects.get(schedule_id=schedule.id)


def growth_mib(report: dict) -> float:
    return (report["peakKiB"] - report["atRestKiB"]) / 1024


@pytest.fixture
def system(processes, redis_url, moto_server, settings):
    with redis_mode(processes, settings, redis_url=redis_url, s3_endpoint=moto_server, bucket_prefix="memory"):
        yield processes


def test_streamed_output__200_mb_reach_s3_while_the_process_running_the_job_stays_under_100_mb(system):
    run = due_run(make_tenant("acme"), {
        "name": "orders", "jobType": "examples.orders_csv", "params": {"rows": ROWS},
        "recurrence": {"kind": "cron", "cron": "0 6 * * *", "timezone": "Europe/Berlin"}})

    report = run_in_celery_worker(system, "long", run, RESULT_MAX_BYTES=str(256 * 2**20))  # past the 64 MiB default

    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.result_size > 200 * 1024 * 1024
    store = get_object_store()
    key = store._s3_key(run.result_key)
    head = store.client.head_object(Bucket=store.bucket, Key=key, VersionId=run.result_version_id, PartNumber=1)
    assert head["PartsCount"] >= 25  # a multipart upload of 8 MiB parts
    digest = hashlib.sha256()
    body = store.client.get_object(Bucket=store.bucket, Key=key, VersionId=run.result_version_id)["Body"]
    for chunk in body.iter_chunks(8 * 1024 * 1024):
        digest.update(chunk)
    assert run.result_checksum == "sha256:" + digest.hexdigest()
    print(f"pool process at rest {report['atRestKiB'] / 1024:.1f} MiB, "
          f"peak {report['peakKiB'] / 1024:.1f} MiB ({report['peakKiB'] * 1024 / 1e6:.1f} MB), "
          f"growth {growth_mib(report):.1f} MiB for a {run.result_size / 2**20:.0f} MiB output; "
          f"worker main process at rest {report['workerAtRestKiB'] / 1024:.1f} MiB")
    assert report["peakKiB"] * 1024 < MAX_PEAK_BYTES
    assert growth_mib(report) < MAX_GROWTH_MIB


def test_memory_measure__sees_memory_a_job_holds(system):
    tenant = make_tenant("team", celery_tasks=["tests.bridge.hold"])
    run = due_run(tenant, {
        "name": "hold", "jobType": "celery.task", "params": {"task": "tests.bridge.hold", "args": [150]},
        "recurrence": {"kind": "cron", "cron": "0 6 * * *", "timezone": "Europe/Berlin"}})

    report = run_in_celery_worker(system, "short", run, SCHEDULER_JOB_MODULES="tests.workers.bridge_tasks")

    assert Run.objects.get(id=run.id).state == RunState.SUCCEEDED
    assert growth_mib(report) >= 140
