"""A directive and the scanner racing on the same instant, each in its own PostgreSQL
session: the locking scan and the armed timer alike end in exactly one outcome, the
directive applied or refused with 409, never written and missed."""

import time
import pytest
from django.db import connection

from kernel.clock import authority_now, instant
from kernel.errors import InvalidState
from runs.authority import arm, fire_armed, materialize_due
from runs.models import Run, RunState, SkipReason
from schedule_services.directives import directive_put
from schedule_services.lifecycle import schedule_create
from scheduler_project.http.schedule_requests import schedule_spec
from schedules.models import OccurrenceDirective, Schedule
from tests.authority_steps import LEAD
from tests.concurrency.harness import race

ROUNDS = 6


def _hourly(tenant, anchor, n: int) -> list[Schedule]:
    return [schedule_create(tenant=tenant, spec=schedule_spec({
        "name": f"s{i}", "jobType": "demo.sleep", "params": {"seconds": 0}, "overlapPolicy": "allow",
        "recurrence": {"kind": "interval", "everySeconds": 3600, "anchor": instant(anchor)}}))[0] for i in range(n)]


def _one_outcome_each(schedules, at, puts) -> set[str]:
    """Every schedule has exactly one run at ``at``: skipped by the directive when the PUT
    was accepted, an ordinary run when it was refused with invalid_state."""
    seen = set()
    for schedule, put in zip(schedules, puts):
        runs = list(Run.objects.filter(schedule_id=schedule.id, scheduled_at=at))
        assert len(runs) == 1, schedule.id
        if put.ok:
            assert (runs[0].state, runs[0].skip_reason) == (RunState.SKIPPED, SkipReason.DIRECTIVE)
            seen.add("applied")
        else:
            assert isinstance(put.error, InvalidState), put.error
            assert runs[0].state == RunState.QUEUED
            assert not OccurrenceDirective.objects.filter(schedule=schedule).exists()
            seen.add("refused")
    return seen


def _put(tenant, schedule, at):
    return lambda: directive_put(tenant=tenant, schedule_id=schedule.id, at=at, action="skip")


def test_directive_races_the_locking_scan__one_outcome_per_instant(tenant, sessions):
    client, scanner = sessions("client"), sessions("scanner")
    at = authority_now().replace(microsecond=0) + LEAD
    schedules = _hourly(tenant, at, ROUNDS)
    time.sleep(max(0.0, (at - authority_now()).total_seconds()) + 0.05)

    puts = []
    for schedule in schedules:
        put, _ = race((client, _put(tenant, schedule, at)),
                      (scanner, lambda s=schedule: materialize_due(ids=[s.id])))
        puts.append(put)
    materialize_due()  # what a refused armed write or a skipped lock left due

    _one_outcome_each(schedules, at, puts)


def test_directive_races_the_armed_timer__one_outcome_per_instant(tenant, sessions):
    if connection.vendor != "postgresql":
        pytest.skip("armed timers are PostgreSQL's: the embedded SQLite fires through the locking path")
    client, scanner = sessions("client"), sessions("scanner")
    at = authority_now().replace(microsecond=0) + LEAD
    schedules = _hourly(tenant, at, ROUNDS)
    armed = arm([s.id for s in schedules])
    assert set(armed) == {s.id for s in schedules}
    time.sleep(max(0.0, (at - authority_now()).total_seconds()) + 0.05)

    puts = []
    for schedule in schedules:
        put, _ = race((client, _put(tenant, schedule, at)),
                      (scanner, lambda s=schedule: fire_armed([armed[s.id]])))
        puts.append(put)
    materialize_due()  # the guard refused a timer armed before the directive: the scan writes it

    _one_outcome_each(schedules, at, puts)
