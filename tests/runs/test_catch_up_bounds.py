"""A long scanner outage must not stop materialization (docs/operations.md, "A long scanner
outage"). A transaction plans and writes a bounded amount whatever the backlog; a schedule
whose plan could walk too long is planned with no transaction open and written only if
unchanged; resume plans before it locks the schedule."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection

from kernel.clock import authority_now
from runs import authority
from runs.authority import catch_up_bounds, materialize, resume
from runs.catch_up import SKIPPED_RECORDS_CAP
from runs.models import Run, RunState, SkipReason
from schedule_services.lifecycle import schedule_create, schedule_pause
from scheduler_project.http.schedule_requests import schedule_spec
from schedules import recurrence
from schedules.models import Schedule

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("file_objects")]

BACKLOG = timedelta(hours=6)
MINUTELY_INSTANTS = 360  # in a six-hour backlog, give or take the instant at either end


def minutely_schedules(tenant, n: int, *, backlog=BACKLOG, every_seconds: int = 60, **policy) -> list[Schedule]:
    """``n`` schedules every ``every_seconds`` (a minute unless said), overdue by ``backlog``
    (a stopped scanner). Their anchors differ by whole days (before any instant a test
    uses), so no two share a rule and every one is planned on its own."""
    start = authority_now().replace(microsecond=0) - backlog
    schedules = []
    for i in range(n):
        anchor = (start - timedelta(days=i + 3)).isoformat().replace("+00:00", "Z")
        schedule, _ = schedule_create(tenant=tenant, spec=schedule_spec({
            "name": f"minutely-{i}", "jobType": "demo.sleep", "params": {"seconds": 0},
            "recurrence": {"kind": "interval", "everySeconds": every_seconds, "anchor": anchor},
            "overlapPolicy": "allow", **policy,
        }))
        schedules.append(schedule)
    Schedule.objects.filter(id__in=[s.id for s in schedules]).update(next_run_at=start)
    return schedules


@contextmanager
def transaction_gaps():
    """The longest pause between two statements of one transaction on this connection: the
    time PostgreSQL sees the session idle in transaction (COPY streaming counts as a pause,
    so this is an upper bound)."""
    gaps, last = [0.0], {}

    def timed(execute, sql, params, many, context):
        started = time.monotonic()
        if connection.in_atomic_block and "end" in last:
            gaps.append(started - last["end"])
        try:
            return execute(sql, params, many, context)
        finally:
            if connection.in_atomic_block:
                last["end"] = time.monotonic()
            else:
                last.clear()

    with connection.execute_wrapper(timed):
        yield gaps


@pytest.fixture
def planned_inside(monkeypatch) -> list[bool]:
    """Whether each catch-up plan was made inside a transaction."""
    inside, original = [], catch_up_bounds.plan_catch_up

    def watched(*args, **kwargs):
        inside.append(connection.in_atomic_block)
        return original(*args, **kwargs)

    monkeypatch.setattr(catch_up_bounds, "plan_catch_up", watched)
    return inside


def scan_until_caught_up() -> list[int]:
    """materialize_due until nothing is due; the rows each call wrote."""
    written = []
    while True:
        before = Run.objects.count()
        if authority.materialize_due().schedules == 0:
            return written
        written.append(Run.objects.count() - before)
        assert len(written) < 200, "the catch-up never ended"


def test_long_outage__each_transaction_writes_at_most_its_row_budget(tenant, settings):
    settings.SCAN_ROWS_PER_TRANSACTION = 1000
    schedules = minutely_schedules(tenant, 12, misfirePolicy="latest_only")

    written = scan_until_caught_up()

    # 361 rows a schedule (one run, 360 skipped records): two fit in a budget of 1000.
    assert max(written) <= 1000 and len(written) == 6
    for schedule in schedules:
        runs = Run.objects.filter(schedule=schedule)
        assert runs.filter(state=RunState.QUEUED).count() == 1
        assert runs.filter(state=RunState.SKIPPED, skip_reason=SkipReason.MISFIRE).count() in (
            MINUTELY_INSTANTS, MINUTELY_INSTANTS + 1)


@pytest.mark.alone  # the pauses are wall time: a test beside it on two cores stretches them
@pytest.mark.django_db(transaction=True)
def test_long_outage__each_transaction_pauses_briefly_between_statements(tenant, settings):
    settings.SCAN_ROWS_PER_TRANSACTION = 5000
    minutely_schedules(tenant, 40, misfirePolicy="skip", misfireGraceSeconds=0)

    with transaction_gaps() as gaps:
        scan_until_caught_up()

    # Planning 13 schedules' 361 instants and writing 5,000 rows is all the Python work
    # inside one transaction: far below the 10 s idle-in-transaction timeout.
    assert max(gaps) < 2.0
    assert Run.objects.filter(state=RunState.SKIPPED).count() >= 40 * MINUTELY_INSTANTS


@pytest.mark.django_db(transaction=True)
def test_backlog_too_long_to_walk_under_locks__planned_with_no_transaction_open(tenant, planned_inside):
    # Every second for 12 hours: 43,200 instants, more than a plan may walk under locks.
    schedules = minutely_schedules(tenant, 2, backlog=timedelta(hours=12), every_seconds=1,
                                   misfirePolicy="skip", misfireGraceSeconds=0)

    stats = authority.materialize_due()

    assert stats.schedules == 2 and planned_inside == [False, False]
    for schedule in schedules:
        runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
        assert {(r.state, r.skip_reason) for r in runs} == {(RunState.SKIPPED, SkipReason.MISFIRE)}
        assert len(runs) == SKIPPED_RECORDS_CAP + 1 and runs[0].skipped_count
        schedule.refresh_from_db()
        assert sum(r.skipped_count or 1 for r in runs) == (schedule.next_run_at - runs[0].scheduled_at).seconds


def test_planned_first__schedule_edited_before_it_is_locked_again__plan_not_written(tenant, monkeypatch):
    edited, other = minutely_schedules(tenant, 2, backlog=timedelta(hours=12), every_seconds=1,
                                       misfirePolicy="skip", misfireGraceSeconds=0)
    original = materialize.plan_within_budget

    def plan_then_edit(plans, candidates, **limits):
        chosen = original(plans, candidates, **limits)
        if not limits:  # planned with no transaction open: a client edits the policy meanwhile
            Schedule.objects.filter(id=edited.id).update(misfire_policy="latest_only")
        return chosen

    monkeypatch.setattr(materialize, "plan_within_budget", plan_then_edit)
    stats = authority.materialize_due()

    assert stats.schedules == 1
    assert not Run.objects.filter(schedule=edited).exists()
    assert Run.objects.filter(schedule=other).count() == SKIPPED_RECORDS_CAP + 1
    monkeypatch.undo()

    authority.materialize_due()  # planned again, under the policy now in force
    assert Run.objects.filter(schedule=edited, state=RunState.QUEUED).count() == 1


def paused_for(schedule: Schedule, pause: timedelta) -> None:
    """Pause the schedule as if it had been paused ``pause`` ago."""
    schedule_pause(tenant=schedule.tenant, schedule_id=schedule.id)
    Schedule.objects.filter(id=schedule.id).update(
        resume_from=instant_before(schedule, pause), paused_at=authority_now() - pause)


def instant_before(schedule: Schedule, ago: timedelta):
    """The schedule's first instant not earlier than ``ago`` before now."""
    rule = recurrence.parse_rule(schedule.recurrence)
    return recurrence.next_after(rule, authority_now() - ago - timedelta(microseconds=1))


@pytest.mark.django_db(transaction=True)
def test_resume__two_day_pause__planned_before_the_lock_with_exact_policy(tenant, planned_inside):
    schedule = minutely_schedules(tenant, 1, misfirePolicy="latest_only")[0]
    paused_for(schedule, timedelta(days=2))
    resumed = authority.schedule_resume(tenant=tenant, schedule_id=schedule.id)

    assert planned_inside == [False]
    assert not resumed.paused and resumed.next_run_at > authority_now() - timedelta(minutes=1)
    runs = list(Run.objects.filter(schedule=schedule).order_by("scheduled_at"))
    ranges = [r for r in runs if r.skipped_count]
    assert [r.state for r in runs if r.state != RunState.SKIPPED] == [RunState.QUEUED]
    assert len(ranges) == 1 and len(runs) == SKIPPED_RECORDS_CAP + 2
    assert sum(r.skipped_count or 1 for r in runs) in (2 * 1440, 2 * 1440 + 1)
    assert runs[-1].state == RunState.QUEUED


def test_resume__paused_again_between_planning_and_locking__plans_that_pause(tenant, monkeypatch):
    schedule = minutely_schedules(tenant, 1, misfirePolicy="skip", misfireGraceSeconds=0)[0]
    paused_for(schedule, timedelta(hours=1))
    original, calls = resume._plan_resume, []

    def plan_then_repause(tenant, schedule_id):
        planned = original(tenant, schedule_id)
        if not calls:  # another client resumes and pauses again, one hour further back
            Schedule.objects.filter(id=schedule_id).update(
                resume_from=instant_before(schedule, timedelta(hours=2)), paused_at=authority_now())
        calls.append(planned)
        return planned

    monkeypatch.setattr(resume, "_plan_resume", plan_then_repause)
    authority.schedule_resume(tenant=tenant, schedule_id=schedule.id)

    assert len(calls) == 2
    skipped = Run.objects.filter(schedule=schedule, state=RunState.SKIPPED).count()
    assert skipped in (120, 121) and Run.objects.filter(schedule=schedule).count() == skipped
