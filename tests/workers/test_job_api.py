"""The public job API: a job declared in a team's module is discovered, synced into the catalog
and run end to end; the catalog sync reports its diff and refuses a schema changed in place."""

import dataclasses
import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kernel.clock import authority_now
from objectstore import get_object_store
from runs import authority
from runs.models import Run, RunState
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import JobType, Schedule
from tests.child_env import database_url_of_test_db
from workers.intake import claim_and_execute
from workers.jobs import framework
from workers.jobs.discovery import discover_jobs

FIXTURE_MODULE = "tests.jobs_fixture"
FIXTURE_JOB = "fixture.invoice_export"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def job_registry(monkeypatch):
    """The job registry as the built-in jobs left it, with the fixture module not imported yet;
    both are put back after the test, so its declarations never leak into other tests."""
    monkeypatch.setattr(framework, "JOBS", dict(framework.JOBS))
    framework.JOBS.pop(FIXTURE_JOB, None)
    monkeypatch.setitem(sys.modules, FIXTURE_MODULE, None)
    del sys.modules[FIXTURE_MODULE]
    return framework.JOBS


@pytest.fixture
def fixture_job_synced(job_registry, settings, db):
    settings.SCHEDULER_JOB_MODULES = [FIXTURE_MODULE]
    discover_jobs()
    call_command("sync_job_types", stdout=io.StringIO())
    return JobType.objects.get(name=FIXTURE_JOB)


def sync(*args) -> str:
    out = io.StringIO()
    call_command("sync_job_types", *args, stdout=out)
    return out.getvalue()


def declare_again(job_registry, **changes):
    """The fixture job as a later deployment declares it, with ``changes``."""
    job_registry[FIXTURE_JOB] = dataclasses.replace(job_registry[FIXTURE_JOB], **changes)


def test_discovery__imports_the_modules_named_in_scheduler_job_modules(job_registry, settings):
    settings.SCHEDULER_JOB_MODULES = []
    discover_jobs()
    assert FIXTURE_JOB not in job_registry

    settings.SCHEDULER_JOB_MODULES = [FIXTURE_MODULE]
    discover_jobs()

    declared = job_registry[FIXTURE_JOB]
    assert declared.function.__module__ == FIXTURE_MODULE
    assert (declared.resource_class, declared.default_lease_seconds, declared.timeout_seconds,
            declared.max_attempts, declared.uncertain_effect_policy) == ("long", 60, 1800, 3, "hold")


def test_declaration__a_second_function_under_the_same_name_is_refused(job_registry):
    with pytest.raises(ValueError, match="declared twice"):
        framework.scheduler_job("demo.sleep")(lambda ctx: None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("file_objects")
def test_declared_job__is_synced_and_runs_end_to_end_with_its_result_published(job_registry, settings, tenant):
    settings.SCHEDULER_JOB_MODULES = [FIXTURE_MODULE]
    discover_jobs()
    assert f"added    {FIXTURE_JOB}: resource_class='long'" in sync()
    job_type = JobType.objects.get(name=FIXTURE_JOB)
    assert (job_type.default_lease_seconds, job_type.timeout_seconds, job_type.enabled) == (60, 1800, True)
    tenant.allowed_job_types.add(job_type)
    body = {"name": "invoices", "jobType": FIXTURE_JOB, "params": {"month": "2027-03"},
            "recurrence": {"kind": "cron", "cron": "0 6 1 * *", "timezone": "Europe/Berlin"}}
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert authority.materialize_due().queued == 1

    assert claim_and_execute(resource_classes=["short"], worker_label="w") == []
    [outcome] = claim_and_execute(resource_classes=["long"], worker_label="w")

    assert outcome.outcome == "succeeded", outcome.error
    run = Run.objects.get(id=outcome.run_id)
    assert run.state == RunState.SUCCEEDED and run.result_content_type == "text/csv"
    assert run.payload["timeoutSeconds"] == 1800
    data = get_object_store().get(run.result_key, run.result_version_id)
    assert data == f"month,run,scheduled_at\n2027-03,{run.id},{run.scheduled_at.isoformat()}\n".encode()


def test_sync_job_types__check_prints_the_diff_and_changes_nothing(fixture_job_synced, job_registry):
    assert sync("--check") == "job types: the catalog matches the declarations\n"
    declare_again(job_registry, timeout_seconds=900, max_attempts=5)
    JobType.objects.create(name="retired.job", resource_class="short")

    with pytest.raises(CommandError, match=r"2 job type\(s\) differ"):
        out = io.StringIO()
        call_command("sync_job_types", "--check", stdout=out)

    assert out.getvalue().splitlines() == [
        f"changed  {FIXTURE_JOB}: timeout_seconds 1800 -> 900, max_attempts 3 -> 5",
        "disabled retired.job: no declaration any more (its schedules and runs keep the row)",
    ]
    assert JobType.objects.get(name=FIXTURE_JOB).timeout_seconds == 1800
    assert JobType.objects.get(name="retired.job").enabled


def test_sync_job_types__applies_the_diff(fixture_job_synced, job_registry):
    declare_again(job_registry, timeout_seconds=900)
    JobType.objects.create(name="retired.job", resource_class="short")

    out = sync()

    assert f"changed  {FIXTURE_JOB}: timeout_seconds 1800 -> 900" in out
    assert JobType.objects.get(name=FIXTURE_JOB).timeout_seconds == 900
    assert not JobType.objects.get(name="retired.job").enabled
    assert sync("--check") == "job types: the catalog matches the declarations\n"


@pytest.mark.parametrize("args", [("--check",), ()])
def test_sync_job_types__refuses_a_schema_change_without_a_version_bump(fixture_job_synced, job_registry, args):
    wider = fixture_job_synced.params_schema | {"required": []}
    declare_again(job_registry, params_schema=wider)

    with pytest.raises(CommandError) as refused:
        sync(*args)

    assert (f"{FIXTURE_JOB}: params_schema changed but params_schema_version is still 1; "
            "declare params_schema_version=2") in str(refused.value)
    assert JobType.objects.get(name=FIXTURE_JOB).params_schema == fixture_job_synced.params_schema


def test_sync_job_types__accepts_a_schema_change_with_a_version_bump(fixture_job_synced, job_registry):
    wider = fixture_job_synced.params_schema | {"required": []}
    declare_again(job_registry, params_schema=wider, params_schema_version=2)

    with pytest.raises(CommandError, match="differ"):
        sync("--check")
    out = sync()

    assert f"changed  {FIXTURE_JOB}: params_schema " in out and "params_schema_version 1 -> 2" in out
    row = JobType.objects.get(name=FIXTURE_JOB)
    assert (row.params_schema, row.params_schema_version) == (wider, 2)


def test_sync_job_types__refuses_a_declaration_the_catalog_cannot_hold(fixture_job_synced, job_registry):
    declare_again(job_registry, resource_class="huge", default_lease_seconds=0)

    with pytest.raises(CommandError) as refused:
        sync()

    assert f"{FIXTURE_JOB}: Value 'huge' is not a valid choice." in str(refused.value)
    assert "jobtype_lease_in_range" in str(refused.value)


def test_migrate__refuses_a_schema_change_without_a_version_bump(fixture_job_synced, job_registry):
    declare_again(job_registry, params_schema={"type": "object"})

    with pytest.raises(CommandError, match="params_schema_version is still 1"):
        call_command("migrate", verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_sync_job_types__a_process_finds_the_modules_in_its_environment():
    env = os.environ | {"DATABASE_URL": database_url_of_test_db(), "SCHEDULER_JOB_MODULES": FIXTURE_MODULE}

    checked = subprocess.run([sys.executable, "manage.py", "sync_job_types", "--check"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)

    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.startswith(f"added    {FIXTURE_JOB}: resource_class='long'")
    assert not JobType.objects.filter(name=FIXTURE_JOB).exists()
