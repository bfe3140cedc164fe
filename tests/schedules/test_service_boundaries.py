"""Every schedule service entry point is its own durable transaction: called inside a
caller's transaction it refuses at once, so no caller can make it part of a larger one
(whose rollback would undo what the service answered as done)."""

from datetime import timedelta

import pytest
from django.db import transaction

from kernel.clock import authority_now
from schedule_services.bulk import schedules_pause_matching
from schedule_services.calendars import calendar_create, calendar_delete
from schedule_services.directives import directive_put
from schedule_services.lifecycle import schedule_create, schedule_delete, schedule_edit, schedule_pause
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.specs import ScheduleSpec
from schedules.tenants import tenant_create
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"name": "s", "jobType": "demo.sleep", "params": {"seconds": 0},
        "recurrence": {"kind": "cron", "cron": "0 9 * * *", "timezone": "UTC"}}

CALLS = {
    "schedule_create": lambda t, s: schedule_create(tenant=t, spec=schedule_spec(BODY)),
    "schedule_edit": lambda t, s: schedule_edit(tenant=t, schedule_id=s.id, expected_revision=1,
                                                changes=ScheduleSpec(name="renamed")),
    "schedule_pause": lambda t, s: schedule_pause(tenant=t, schedule_id=s.id),
    "schedule_delete": lambda t, s: schedule_delete(tenant=t, schedule_id=s.id),
    "schedules_pause_matching": lambda t, s: schedules_pause_matching(tenant=t, labels={"team": "a"},
                                                                      job_type=None),
    "calendar_create": lambda t, s: calendar_create(tenant=t, fields={"name": "holidays"}),
    "calendar_delete": lambda t, s: calendar_delete(tenant=t, calendar_id="cal_missing"),
    "directive_put": lambda t, s: directive_put(tenant=t, schedule_id=s.id, action="skip",
                                                at=authority_now() + timedelta(days=1)),
    "tenant_create": lambda t, s: tenant_create(name="other"),
}


@pytest.mark.parametrize("name", CALLS)
def test_entry_point__inside_a_callers_transaction__refused_and_nothing_written(tenant, name):
    schedule = create_schedule(tenant, cron="0 9 * * *")
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        CALLS[name](tenant, schedule)
    schedule.refresh_from_db()
    assert (schedule.revision, schedule.paused, schedule.deleted_at) == (1, False, None)
