"""The schedule services admit strict start promises themselves: a caller that names no
admission (a command, the beat importer, a script) is checked like the API."""

import pytest

from kernel.errors import DeadlineInfeasible
from runs.capacity.live import slots_report
from schedule_services.lifecycle import schedule_edit
from scheduler_project.http.schedule_requests import schedule_changes
from schedules.models import Schedule
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db
DAILY = "0 9 * * *"  # within the forecast (a yearly instant may lie past it: nothing to check)


def test_create__by_default_admits__a_promise_no_slot_can_keep_is_refused_and_nothing_written(tenant):
    with pytest.raises(DeadlineInfeasible):
        create_schedule(tenant, name="strict", cron=DAILY, startDeadlineSeconds=60)  # no live slots
    assert not Schedule.objects.filter(name="strict").exists()
    create_schedule(tenant, name="ordinary")  # nothing promised: nothing to refuse


def test_edit__by_default_admits__editing_into_a_promise_no_slot_can_keep_is_refused(tenant):
    schedule = create_schedule(tenant, cron=DAILY)
    revision, changes = schedule_changes({"expectedRevision": 1, "startDeadlineSeconds": 60})
    with pytest.raises(DeadlineInfeasible):
        schedule_edit(tenant=tenant, schedule_id=schedule.id, expected_revision=revision, changes=changes)
    assert Schedule.objects.get(id=schedule.id).revision == 1


def test_create__a_promise_the_live_slots_keep__is_admitted(tenant):
    slots_report("embedded:test:1", {"short": 10})
    assert create_schedule(tenant, name="strict", cron=DAILY, startDeadlineSeconds=60).start_deadline_seconds == 60
