"""A calendar edit racing a schedule write that starts using the calendar: the edit is either
read by the write or recomputes the schedule after it (real PostgreSQL sessions)."""

import time
from datetime import timedelta

import pytest

from schedule_services.calendars import calendar_create, calendar_update
from schedule_services.lifecycle import schedule_update
from schedules.models import Schedule
from schedules.specs import ScheduleSpec
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db(transaction=True)


def test_calendar_edit_waits_for_a_schedule_write_reading_it_then_recomputes_it(tenant, sessions):
    editor, calendar_editor = sessions("schedule-editor"), sessions("calendar-editor")
    calendar = calendar_create(tenant=tenant, fields={"name": "holidays"})
    schedule = create_schedule(tenant, cron="0 9 * * *")
    first = schedule.next_run_at

    def adopt_calendar():
        schedule_update(tenant=tenant, schedule_id=schedule.id, expected_revision=1,
                        changes=ScheduleSpec(calendar={"calendarIds": [calendar.id], "policy": "skip"}))

    with editor.holding(adopt_calendar):  # the schedule write is done, not yet committed
        edit = calendar_editor.submit(lambda: calendar_update(
            tenant=tenant, calendar_id=calendar.id, expected_revision=1,
            fields={"exclude_dates": [first.date().isoformat()]}))
        time.sleep(0.5)
        assert not edit.done()  # waits for the calendar rows the schedule write holds
    edit.result(30)

    stored = Schedule.objects.get(id=schedule.id)
    assert stored.calendar == {"calendarIds": [calendar.id], "policy": "skip"}
    assert stored.next_run_at == first + timedelta(days=1)
