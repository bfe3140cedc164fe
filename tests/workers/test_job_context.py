"""The job context as a job sees it, through the real runtime and authority on PostgreSQL:
its fields, the run's logger, progress (throttled, fenced, shown by the API) and the three
ways to give an output (bytes, a file, a streamed writer)."""

import io
import logging
import math
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
from django.core.management import call_command

from objectstore import get_object_store
from runs import authority
from runs.models import Run, RunState, StoredObject
from schedules.models import JobType
from tests.authority_steps import create_schedule, expire_lease, publish, stage, start_run
from tests.factories import api_client
from tests.workers.test_runtime import in_background, joined
from workers.jobs import framework
from workers.jobs.framework import JobContext, JobOutput, scheduler_job
from workers.runtime import execute_claimed


@pytest.fixture
def declare(monkeypatch):
    """Declare a job for this test only, synced into the catalog; the registry is put back after."""
    monkeypatch.setattr(framework, "JOBS", dict(framework.JOBS))

    def declare_job(name: str, function, **entry):
        scheduler_job(name, **entry)(function)
        call_command("sync_job_types", stdout=io.StringIO())
        return name

    return declare_job


def started(tenant, job_type: str, *, timezone_name: str = "UTC") -> Run:
    """A running first attempt of a schedule of ``job_type`` (granted to ``tenant``)."""
    tenant.allowed_job_types.add(JobType.objects.get(name=job_type))
    schedule = create_schedule(tenant, job_type=job_type, params={}, cron="0 0 1 1 *")
    schedule.recurrence["timezone"] = timezone_name
    type(schedule).objects.filter(id=schedule.id).update(recurrence=schedule.recurrence)
    return start_run(schedule)


def api_run(tenant, run_id: str) -> dict:
    response = api_client(tenant).get(f"/api/v1/runs/{run_id}")
    assert response.status_code == 200
    return response.json()


def stored_result(run: Run) -> tuple[bytes, StoredObject]:
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED, run.error
    return get_object_store().get(run.result_key, run.result_version_id), StoredObject.objects.get(key=run.result_key)


# ---------------------------------------------------------------- fields and logger

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_context__carries_params_instants_tenant_attempt_and_a_run_logger(declare, tenant, caplog):
    seen = {}

    def job(ctx: JobContext):
        seen.update(params=ctx.params, utc=ctx.scheduled_at, local=ctx.scheduled_at_local, tenant=ctx.tenant,
                    attempt=ctx.attempt, job_type=ctx.job_type)
        ctx.logger.info("exporting %s", "rows")
        return b"ok"

    declare("test.context", job)
    run = started(tenant, "test.context", timezone_name="America/New_York")
    expire_lease(run.id)  # the first attempt is lost; the context of the second says so
    authority.sweep_expired_leases()
    run = authority.claim(worker_label="w2")
    caplog.set_level(logging.INFO, logger="jobs.test.context")

    assert execute_claimed(run).outcome == "succeeded"

    assert seen["params"] == {} and seen["job_type"] == "test.context" and seen["attempt"] == 2
    assert seen["utc"] == run.scheduled_at and seen["utc"].utcoffset().total_seconds() == 0
    assert seen["local"] == run.scheduled_at and str(seen["local"].tzinfo) == "America/New_York"
    assert (seen["tenant"].id, seen["tenant"].name) == (tenant.id, "acme")
    [line] = [r for r in caplog.records if r.name == "jobs.test.context"]
    assert line.getMessage() == f"[run={run.id} attempt=2] exporting rows"
    assert (line.run_id, line.attempt) == (run.id, 2)


# ---------------------------------------------------------------- progress

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_progress__shown_by_the_api_while_running_then_its_last_value(declare, tenant):
    reported, release = threading.Event(), threading.Event()

    def job(ctx: JobContext):
        ctx.progress(0.25, "reading orders")
        reported.set()
        while not release.is_set():
            ctx.sleep(0.05)
        ctx.progress(0.5, "writing")  # within the second: pending, written when the job returns
        ctx.progress(0.75, "almost done")
        return b"done"

    declare("test.progress", job)
    run = started(tenant, "test.progress")
    assert api_run(tenant, run.id)["progress"] is None

    thread, box = in_background(execute_claimed, run)
    try:
        assert reported.wait(15)
        running = api_run(tenant, run.id)
    finally:
        release.set()
    assert joined(thread, box).outcome == "succeeded"

    assert running["state"] == "running"
    assert running["progress"]["fraction"] == 0.25 and running["progress"]["message"] == "reading orders"
    assert running["progress"]["updatedAt"].endswith("Z")
    finished = api_run(tenant, run.id)
    assert finished["state"] == "succeeded"  # complete, with the job's last words
    assert (finished["progress"]["fraction"], finished["progress"]["message"]) == (1.0, "almost done")


@pytest.mark.django_db
@pytest.mark.usefixtures("file_objects")
@pytest.mark.parametrize("outcome", ["succeeded", "failed", "canceled"])
def test_progress__a_succeeded_run_reads_complete_a_failed_or_canceled_one_keeps_its_last(tenant, outcome):
    run = start_run(create_schedule(tenant))
    owner = dict(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence)
    assert authority.record_progress(**owner, fraction=0.995, message="1990000 of 2000000 invoices")
    last = api_run(tenant, run.id)["progress"]
    if outcome == "succeeded":
        publish(run, stage(run, b"invoices"))
    else:
        if outcome == "canceled":
            authority.run_cancel(tenant=tenant, run_id=run.id)
        authority.complete(**owner, outcome=outcome, error="stopped")

    finished = api_run(tenant, run.id)
    assert finished["state"] == outcome
    if outcome == "succeeded":
        assert finished["progress"] == {"fraction": 1.0, "message": "1990000 of 2000000 invoices",
                                        "updatedAt": finished["finishedAt"]}
    else:
        assert finished["progress"] == last


@pytest.mark.django_db
def test_record_progress__only_while_the_attempt_owns_the_run(tenant):
    run = start_run(create_schedule(tenant))
    owner = dict(run_id=run.id, attempt_id=run.current_attempt_id)

    assert authority.record_progress(**owner, fence=run.fence, fraction=0.5, message="half")
    assert not authority.record_progress(**owner, fence=run.fence + 1, fraction=0.9, message="wrong fence")
    assert not authority.record_progress(run_id=run.id, attempt_id="att_other", fence=run.fence, fraction=0.9)
    expire_lease(run.id)
    assert not authority.record_progress(**owner, fence=run.fence, fraction=0.9, message="lease passed")

    run.refresh_from_db()
    assert (run.progress_fraction, run.progress_message, run.progress_attempt) == (0.5, "half", 1)


@pytest.mark.django_db
def test_progress__of_an_earlier_attempt_is_not_shown_for_the_next(tenant):
    run = start_run(create_schedule(tenant))
    assert authority.record_progress(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence,
                                     fraction=0.9, message="first attempt")
    expire_lease(run.id)
    authority.sweep_expired_leases()
    second = authority.claim(worker_label="w2")
    assert second.id == run.id and second.attempt_count == 2

    assert api_run(tenant, run.id)["progress"] is None


@pytest.mark.parametrize("fraction", [1.5, -0.1, math.nan, True, "0.5", None])
def test_progress__refuses_a_fraction_outside_0_to_1(fraction):
    ctx = JobContext("run_1", "att_1", 1, datetime(2027, 1, 1, tzinfo=timezone.utc), "UTC", {})
    with pytest.raises(ValueError, match="from 0 to 1"):
        ctx.progress(fraction, "x")


def test_progress__written_at_most_once_a_second_the_latest_value_last():
    writes = []
    ctx = JobContext("run_1", "att_1", 1, datetime(2027, 1, 1, tzinfo=timezone.utc), "UTC", {},
                     progress_sink=lambda fraction, message: writes.append((fraction, message)))

    for i in range(1, 101):
        ctx.progress(i / 100, f"{i}%")
    assert writes == [(0.01, "1%")]
    ctx.flush_progress()  # what the runtime does when the job returns
    assert writes == [(0.01, "1%"), (1.0, "100%")]
    ctx.flush_progress()
    assert len(writes) == 2

    ctx.progress(0.5, "m" * 600)
    assert len(writes) == 2  # still within the second of the last write
    ctx._progress_sent_at -= ctx.PROGRESS_INTERVAL
    ctx.progress(0.6, "m" * 600)
    assert writes[-1] == (0.6, "m" * 500)


# ---------------------------------------------------------------- outputs

def bytes_job(ctx):
    return b"a,b\n1,2\n"


def output_job(ctx):
    return JobOutput(b"a,b\n1,2\n", "text/csv", "table.csv")


def streamed_job(ctx):
    with ctx.output(content_type="text/csv", filename="table.csv") as out:
        out.write("a,b\n")
        out.write(b"1,2\n")
        ctx.spool = out.path


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
@pytest.mark.parametrize("function, content_type, filename", [
    (bytes_job, "application/octet-stream", ""),
    (output_job, "text/csv", "table.csv"),
    (streamed_job, "text/csv", "table.csv"),
])
def test_output__bytes_a_job_output_or_a_stream_is_published(declare, tenant, function, content_type, filename):
    declare("test.output", function)
    run = started(tenant, "test.output")

    assert execute_claimed(run).outcome == "succeeded"

    data, stored = stored_result(run)
    assert data == b"a,b\n1,2\n"
    assert (stored.content_type, stored.filename) == (content_type, filename)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_output__a_returned_file_is_published_and_kept_a_spool_is_deleted(declare, tenant, tmp_path):
    report = tmp_path / "report.csv"
    report.write_bytes(b"x,y\n" * 100_000)
    spools = []

    def file_job(ctx):
        return Path(report)

    def spool_job(ctx):
        with ctx.output("text/csv") as out:
            out.write(b"x,y\n" * 100_000)
        spools.append(out.path)

    declare("test.file", file_job)
    declare("test.spool", spool_job)
    for job_type in ("test.file", "test.spool"):
        run = started(tenant, job_type)
        assert execute_claimed(run).outcome == "succeeded"
        data, stored = stored_result(run)
        assert data == b"x,y\n" * 100_000
    assert stored.filename == "" and StoredObject.objects.filter(filename="report.csv").count() == 1
    assert report.exists()  # the job's own file is the job's
    assert not os.path.exists(spools[0])  # the spool of a streamed output is the runtime's


def two_outputs(ctx):
    with ctx.output() as out:
        out.write(b"1")
    return b"2"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
@pytest.mark.parametrize("function, error", [
    (lambda ctx: None, "returned NoneType"),
    (lambda ctx: "a,b", "returned str"),
    (two_outputs, "returned another one"),
    (lambda ctx: Path("/nonexistent/report.csv"), "No such file"),
])
def test_output__a_job_without_one_clear_output_fails(declare, tenant, function, error):
    declare("test.bad_output", function, max_attempts=1)
    run = started(tenant, "test.bad_output")

    outcome = execute_claimed(run)

    assert outcome.outcome == "failed" and error in outcome.error
    assert Run.objects.get(id=run.id).state == RunState.FAILED


# ---------------------------------------------------------------- one cap on a result

def streamed_past_the_cap(ctx):
    with ctx.output("text/csv") as out:
        ctx.spool = out.path
        for _ in range(100):
            out.write(b"x" * 1000)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
@pytest.mark.parametrize("function", [
    lambda ctx: b"x" * 5001,
    lambda ctx: JobOutput(b"x" * 5001, "text/csv", "big.csv"),
    streamed_past_the_cap,
], ids=["bytes", "job output", "streamed"])
def test_output__past_result_max_bytes_fails_the_run_for_good_and_stores_nothing(declare, tenant, settings, function):
    settings.RESULT_MAX_BYTES = 5000
    declare("test.big", function, max_attempts=3)
    run = started(tenant, "test.big")

    outcome = execute_claimed(run)

    assert outcome.outcome == "failed" and "result too large: more than RESULT_MAX_BYTES (5000 bytes)" in outcome.error
    run.refresh_from_db()
    assert run.state == RunState.FAILED and run.attempt_count == 1  # retrying cannot make it smaller
    assert not StoredObject.objects.filter(run=run).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_output__a_returned_file_past_the_cap_fails__a_stream_is_never_spooled_past_it(declare, tenant, settings,
                                                                                         tmp_path):
    settings.RESULT_MAX_BYTES = 5000
    report = tmp_path / "report.csv"
    report.write_bytes(b"x" * 5001)
    declare("test.file", lambda ctx: report)
    assert "result too large" in execute_claimed(started(tenant, "test.file")).error
    spooled = []

    def stream(ctx):
        with ctx.output() as out:
            try:
                out.write(b"x" * 4000)
                out.write(b"x" * 1001)
            finally:
                out.close()
                spooled.append(os.path.getsize(out.path))

    declare("test.stream", stream)
    assert "result too large" in execute_claimed(started(tenant, "test.stream")).error
    assert spooled == [4000]
