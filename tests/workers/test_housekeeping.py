"""Housekeeping through django-celery-beat, and the metrics endpoint."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django_celery_beat.models import PeriodicTask

from kernel.clock import authority_now
from runs import authority
from runs.models import Run, RunState
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from workers import tasks

pytestmark = pytest.mark.django_db


def test_install_housekeeping__registers_each_task_once_on_the_housekeeping_queue():
    call_command("install_housekeeping")
    call_command("install_housekeeping")  # idempotent: deploys run it every time
    registered = {t.task: t for t in PeriodicTask.objects.filter(task__startswith="scheduler.")}
    assert set(registered) >= {"scheduler.relay", "scheduler.sweep", "scheduler.effects", "scheduler.cleanup"}
    assert PeriodicTask.objects.filter(task__startswith="scheduler.").count() == len(registered)
    assert all(t.queue == "housekeeping" and t.enabled and t.interval for t in registered.values())


def test_housekeeping_tasks__sweep_and_scan_do_the_authority_work(tenant):
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "recurrence": {"kind": "cron", "cron": "* * * * *"}}))
    Schedule.objects.filter(id=schedule.id).update(next_run_at=authority_now() - timedelta(seconds=1))
    assert tasks.scan.apply().get() == 1
    run = authority.claim(worker_label="w")
    Run.objects.filter(id=run.id).update(lease_expires_at=authority_now() - timedelta(seconds=1))
    assert tasks.sweep.apply().get() == 1
    assert Run.objects.get(id=run.id).state == RunState.QUEUED


def test_metrics__exposes_lateness_histograms_and_backlog_gauges(tenant):
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "recurrence": {"kind": "cron", "cron": "* * * * *"}}))
    authority.run_once(tenant=tenant, schedule_id=schedule.id)
    authority.run_once(tenant=tenant, schedule_id=schedule.id)
    authority.claim(worker_label="w")
    text = Client().get("/metrics").content.decode()
    assert "scheduler_due_to_start_seconds_bucket" in text
    assert "scheduler_queue_delay_seconds_bucket" in text
    assert 'scheduler_runs{resource_class="short",state="queued"} 1.0' in text
    assert 'scheduler_runs{resource_class="short",state="running"} 1.0' in text
    assert 'scheduler_oldest_admitted_due_seconds{resource_class="short"}' in text


@pytest.mark.parametrize("header, status", [
    (None, 401), ("Bearer wrong-token", 401), ("Basic c2NyYXBlOnRva2Vu", 401), ("Bearer scrape-token", 200),
    ("bearer scrape-token", 200),
])
def test_metrics__with_metrics_token_set_requires_it_as_bearer(db, settings, header, status):
    settings.METRICS_TOKEN = "scrape-token"
    response = Client().get("/metrics", **({"HTTP_AUTHORIZATION": header} if header else {}))
    assert response.status_code == status
    if status == 401:
        assert response.json()["error"]["code"] == "unauthenticated"
        assert response["WWW-Authenticate"].startswith("Bearer")
    else:
        assert b"scheduler_oldest_admitted_due_seconds" in response.content


def test_metrics__without_metrics_token_is_open(db, settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 200
