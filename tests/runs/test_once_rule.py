"""A `once` schedule through the real scanner: one occurrence at its instant, then nothing due."""

import time

import pytest

from kernel.clock import authority_now
from runs import authority
from runs.models import Run
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import Schedule
from tests.authority_steps import LEAD

pytestmark = pytest.mark.django_db


def test_once__materializes_one_occurrence_then_stops(tenant):
    at = authority_now() + LEAD
    body = {"name": "launch", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "once", "at": at.isoformat()}}
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    assert schedule.next_run_at == at

    while authority_now() <= at:  # the rule's own instant comes due (seconds of real time)
        time.sleep(0.05)
    authority.materialize_due()
    assert Run.objects.get(schedule=schedule).scheduled_at == at
    assert Schedule.objects.get(id=schedule.id).next_run_at is None
    authority.materialize_due()
    assert Run.objects.filter(schedule=schedule).count() == 1


def test_once__an_instant_already_past_at_creation_never_fires(tenant):
    body = {"name": "late", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "once", "at": "2020-01-01T00:00:00Z"}}
    schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec(body))
    assert schedule.next_run_at is None
