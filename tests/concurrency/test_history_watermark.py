"""The history watermark never claims a run that a still-open transaction is creating."""

import threading
from datetime import datetime

import pytest
from django.db import connection

from runs.authority import run_once
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from tests.factories import api_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_history_watermark__stays_before_an_uncommitted_run(tenant):
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
        "name": "s", "jobType": "demo.sleep", "recurrence": {"kind": "cron", "cron": "0 9 * * *"}}))
    inserted, release, created = threading.Event(), threading.Event(), {}

    def slow_creator():
        # Authority entry points are durable (never nested in an atomic block), so the open
        # transaction around the insert is a manual one: it commits only when released.
        connection.set_autocommit(False)
        try:
            run, _ = run_once(tenant=tenant, schedule_id=schedule.id)
            created["run"] = run
            inserted.set()
            release.wait(10)
            connection.commit()
        finally:
            connection.close()

    creator = threading.Thread(target=slow_creator)
    creator.start()
    assert inserted.wait(10)
    client = api_client(tenant)
    try:
        page = client.get(f"/api/v1/schedules/{schedule.id}/runs").json()
        assert page["results"] == []
        assert parse(page["watermark"]) <= created["run"].created_at
    finally:
        release.set()
        creator.join()
    page = client.get(f"/api/v1/schedules/{schedule.id}/runs").json()
    assert [r["runId"] for r in page["results"]] == [created["run"].id]
    assert parse(page["watermark"]) >= created["run"].created_at


def parse(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
