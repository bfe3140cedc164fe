"""Timed and bulk resumes race other resumers (real sessions): each pause ends exactly once."""

from datetime import timedelta

import pytest

from kernel.clock import authority_now
from runs.authority import resume_due_pauses, schedule_resume, schedules_resume_action
from runs.models import Run, RunState
from schedule_services.bulk import schedules_pause_matching
from schedule_services.lifecycle import schedule_pause
from schedules.models import AuditEntry, Schedule
from tests.authority_steps import create_schedule
from tests.concurrency.harness import race

pytestmark = pytest.mark.django_db(transaction=True)


def _paused_minutes_ago(ids, minutes: int) -> None:
    """Time passes: the pauses began `minutes` ago and their timed ends are due."""
    now = authority_now().replace(second=0, microsecond=0)
    Schedule.objects.filter(id__in=ids).update(
        paused_at=now - timedelta(minutes=minutes, seconds=30), resume_from=now - timedelta(minutes=minutes),
    )
    Schedule.objects.filter(id__in=ids, paused_until__isnull=False).update(paused_until=now - timedelta(seconds=1))


def _resumed_once(ids) -> None:
    for schedule_id in ids:
        assert not Schedule.objects.get(id=schedule_id).paused
        assert AuditEntry.objects.filter(schedule_id=schedule_id, action="resume").count() == 1, schedule_id
        # latest_only: one run for the missed instants, whoever resumed it.
        assert Run.objects.filter(schedule_id=schedule_id).exclude(state=RunState.SKIPPED).count() == 1, schedule_id


def test_timed_resume__two_scanners_race__each_pause_ends_exactly_once(tenant, sessions):
    a, b = sessions("scanner-a"), sessions("scanner-b")
    ids = []
    for n in range(4):
        schedule = create_schedule(tenant, cron="* * * * *", name=f"s{n}", misfirePolicy="latest_only")
        schedule_pause(tenant=tenant, schedule_id=schedule.id, until=authority_now() + timedelta(hours=1))
        ids.append(schedule.id)
    _paused_minutes_ago(ids, 3)

    outcomes = race((a, resume_due_pauses), (b, resume_due_pauses))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sum(o.value for o in outcomes) == len(ids)
    _resumed_once(ids)
    assert resume_due_pauses() == 0


def test_timed_resume__races_a_manual_resume__one_of_them_ends_the_pause(tenant, sessions):
    scanner, client = sessions("scanner"), sessions("client")
    schedule = create_schedule(tenant, cron="* * * * *", misfirePolicy="latest_only")
    schedule_pause(tenant=tenant, schedule_id=schedule.id, until=authority_now() + timedelta(hours=1))
    _paused_minutes_ago([schedule.id], 2)

    outcomes = race((scanner, resume_due_pauses),
                    (client, lambda: schedule_resume(tenant=tenant, schedule_id=schedule.id)))

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    _resumed_once([schedule.id])


def test_bulk_resume__races_a_manual_resume_and_a_timed_one__each_schedule_resumed_once(tenant, sessions):
    operator, client, scanner = sessions("operator"), sessions("client"), sessions("scanner")
    ids = [create_schedule(tenant, cron="* * * * *", name=f"s{n}", misfirePolicy="latest_only",
                           labels={"team": "finance"}).id for n in range(4)]
    action = schedules_pause_matching(tenant=tenant, labels={"team": "finance"}, job_type=None,
                                      until=authority_now() + timedelta(hours=1))
    assert action.paused == 4
    _paused_minutes_ago(ids, 2)

    outcomes = race(
        (operator, lambda: schedules_resume_action(tenant=tenant, action_id=action.id)[1]),
        (client, lambda: schedule_resume(tenant=tenant, schedule_id=ids[0])),
        (scanner, resume_due_pauses),
    )

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    _resumed_once(ids)
