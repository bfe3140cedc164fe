"""The health evaluation on database time: one incident per breach, resolved by the next
occurrence that meets the expectation (the pass is given a later `now`, as time passing)."""

from datetime import timedelta

import pytest

from kernel.clock import authority_now, instant
from runs.health import evaluation
from runs.health.evaluation import health_pass
from runs.models import Incident, Run
from schedule_services.lifecycle import schedule_delete, schedule_update
from schedules.models import Schedule
from schedules.specs import ScheduleSpec
from tests.authority_steps import REPORT, make_due, publish, stage
from tests.health.steps import claim_all, expecting, fail, later, materialize

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]


def test_late_start__an_occurrence_nothing_claims_opens_one_incident(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    run = materialize(schedule)
    assert not health_pass(now=later(30))
    stats = health_pass(now=later(90))
    assert stats.opened == {"late_start": 1}
    incident = Incident.objects.get()
    assert (incident.kind, incident.run_id, incident.instant, incident.resolved_at) == (
        "late_start", run.id, run.scheduled_at, None)
    assert incident.tenant_id == tenant.id
    assert not health_pass(now=later(300)).opened  # the same breach, still open: nothing more
    assert Incident.objects.count() == 1


def test_late_start__resolved_by_the_next_occurrence_started_in_time(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    materialize(schedule, ago=timedelta(minutes=5))
    health_pass()
    incident = Incident.objects.get()
    claim_all()  # the workers return: the late run starts (late: the incident stays open)
    health_pass()
    assert Incident.objects.get().resolved_at is None
    materialize(schedule, ago=timedelta(seconds=1))
    claim_all()
    stats = health_pass()
    assert stats.resolved["late_start"] == 1
    incident.refresh_from_db()
    assert incident.resolution == "recovered" and incident.resolved_at >= incident.opened_at


def test_late_start__an_instant_never_materialized_is_late_too(tenant):
    schedule = expecting(tenant, startWithinSeconds=60)
    due = make_due(schedule, ago=timedelta(minutes=3))  # the scanner stopped: no run exists
    assert health_pass().opened == {"late_start": 1}
    incident = Incident.objects.get()
    assert incident.run_id is None and incident.instant == due
    assert incident.detail["materialized"] is False
    from runs import authority

    authority.materialize_due()  # the scanner returns: the same breach, not a second incident
    health_pass()
    assert Incident.objects.count() == 1


def test_late_start__a_paused_schedule_owes_nothing(tenant):
    from schedule_services.lifecycle import schedule_pause

    schedule = expecting(tenant, startWithinSeconds=60)
    make_due(schedule, ago=timedelta(minutes=3))
    health_pass()
    schedule_pause(tenant=tenant, schedule_id=schedule.id)
    assert health_pass().resolved["late_start"] == 1
    assert Incident.objects.get().resolution == "paused"
    assert not health_pass().opened


def test_long_running__a_run_past_its_finish_time(tenant):
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (run,) = claim_all()
    assert not health_pass(now=later(30))
    assert health_pass(now=later(61)).opened == {"long_running": 1}
    assert Incident.objects.get().run_id == run.id
    publish(run, stage(run, REPORT))  # it ends, late: a later run must finish in time
    health_pass()
    assert Incident.objects.get().resolved_at is None
    materialize(schedule)
    (second,) = claim_all()
    publish(second, stage(second, REPORT))
    assert health_pass().resolved["long_running"] == 1


def _ran_for(run: Run, seconds: float) -> None:
    """The claimed run started `seconds` ago (as time passing would have put it)."""
    Run.objects.filter(id=run.id).update(started_at=authority_now() - timedelta(seconds=seconds))


def test_long_running__a_run_that_ends_late_between_two_passes(tenant):
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (run,) = claim_all()
    assert not health_pass()  # running, within its time
    _ran_for(run, 90)
    publish(run, stage(run, REPORT))  # finished 90 s after it started, before the next pass
    assert health_pass(now=later(1)).opened == {"long_running": 1}
    incident = Incident.objects.get()
    run.refresh_from_db()
    assert (incident.run_id, incident.instant, incident.resolved_at) == (run.id, run.scheduled_at, None)
    assert incident.detail["finishedAt"] == instant(run.finished_at)
    assert not health_pass(now=later(2)).opened  # the same breach: nothing more
    evaluation._last_pass["at"] = None  # another process's first pass looks back further: the same breach
    assert not health_pass(now=later(3)).opened and Incident.objects.count() == 1
    materialize(schedule)  # the next occurrence finishes in time: resolved
    (second,) = claim_all()
    publish(second, stage(second, REPORT))
    assert health_pass(now=later(4)).resolved == {"long_running": 1}
    evaluation._last_pass["at"] = None  # resolved: never reopened by a pass that reads the late run again
    assert not health_pass(now=later(5)).opened and Incident.objects.count() == 1


def test_long_running__reported_while_running_then_ending_late_is_one_breach(tenant):
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (run,) = claim_all()
    assert health_pass(now=later(61)).opened == {"long_running": 1}
    publish(run, stage(run, REPORT))
    _ran_for(run, 90)
    assert not health_pass(now=later(62)).opened
    assert Incident.objects.get().breach_key == f"run:{run.id}"


def test_long_running__a_late_finish_while_an_earlier_incident_was_open_belongs_to_it(tenant):
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (first,) = claim_all()
    _ran_for(first, 120)
    assert health_pass().opened == {"long_running": 1}  # the first runs long
    publish(first, stage(first, REPORT))
    materialize(schedule)
    (second,) = claim_all()
    _ran_for(second, 90)
    publish(second, stage(second, REPORT))  # the second ends late while the first's incident is open
    assert not health_pass().opened
    materialize(schedule)
    (third,) = claim_all()
    publish(third, stage(third, REPORT))  # the third in time: resolved
    assert health_pass().resolved == {"long_running": 1}
    evaluation._last_pass["at"] = None  # a process started now reads the second's late finish again
    assert not health_pass().opened and Incident.objects.count() == 1


def test_long_running__a_run_that_ended_in_time_is_no_breach(tenant):
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (run,) = claim_all()
    _ran_for(run, 30)
    publish(run, stage(run, REPORT))
    assert not health_pass(now=later(1))


def test_long_running__a_late_finish_older_than_the_look_back_is_not_read(tenant, settings):
    settings.HEALTH_LOOKBACK_SECONDS = 60
    schedule = expecting(tenant, finishWithinSeconds=60)
    materialize(schedule)
    (run,) = claim_all()
    _ran_for(run, 90)
    publish(run, stage(run, REPORT))
    assert not health_pass(now=later(120))  # finished two minutes before this (first) pass
    assert health_pass(now=later(30)).opened == {"long_running": 1}  # a clock gone back: looks back again


def test_failures__a_streak_of_n_opens_and_a_success_resolves(tenant):
    schedule = expecting(tenant, maxConsecutiveFailures=3)
    for number in range(2):
        materialize(schedule)
        fail(claim_all()[0])
        assert not health_pass().opened, number
    materialize(schedule)
    third = fail(claim_all()[0])
    assert health_pass().opened == {"failures": 1}
    incident = Incident.objects.get()
    assert incident.run_id == third.id and incident.detail["failed"] == 3
    materialize(schedule)
    fail(claim_all()[0])
    assert not health_pass().opened  # the same streak
    materialize(schedule)
    run = claim_all()[0]
    publish(run, stage(run, REPORT))
    assert health_pass().resolved["failures"] == 1
    # A new streak is a new breach.
    for _ in range(3):
        materialize(schedule)
        fail(claim_all()[0])
    assert health_pass().opened == {"failures": 1}
    assert Incident.objects.filter(kind="failures").count() == 2


def test_removed_expectation_and_deleted_schedule_resolve_open_incidents(tenant):
    first = expecting(tenant, name="a", startWithinSeconds=60)
    second = expecting(tenant, name="b", startWithinSeconds=60)
    make_due(first, ago=timedelta(minutes=3))
    make_due(second, ago=timedelta(minutes=3))
    assert health_pass().opened == {"late_start": 2}
    schedule_update(tenant=tenant, schedule_id=first.id, expected_revision=1, changes=ScheduleSpec(expectations={}))
    schedule_delete(tenant=tenant, schedule_id=second.id)
    health_pass()
    assert dict(Incident.objects.values_list("schedule_id", "resolution")) == {
        first.id: "expectation_removed", second.id: "schedule_deleted"}


def test_schedules_without_expectations_are_not_read(tenant):
    from tests.authority_steps import create_schedule

    plain = create_schedule(tenant)
    make_due(plain, ago=timedelta(hours=1))
    assert not health_pass()
    assert Schedule.objects.get(id=plain.id).expectations is None
    assert not Run.objects.exists()


def test_late_start__a_job_type_gone_leaves_its_occurrences_late(tenant):
    from runs import authority
    from schedules.models import JobType

    schedule = expecting(tenant, startWithinSeconds=60)
    JobType.objects.filter(name=schedule.job_type_id).update(enabled=False)  # its declaration disappeared
    make_due(schedule, ago=timedelta(minutes=3))
    authority.materialize_due()
    (run,) = Run.objects.filter(schedule=schedule)
    assert run.state in ("pending", "queued") and run.started_at is None  # no worker has its code
    assert health_pass().opened == {"late_start": 1}
    assert Incident.objects.get().run_id is not None
