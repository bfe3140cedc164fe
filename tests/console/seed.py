"""A console world seeded through the services and the real authority: schedules whose
rules fill the next 24 hours, runs that started late by known amounts, a succeeded report
whose email is `uncertain` (the SMTP sink stalls after accepting it), a running run with
progress."""

import time
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model

from effects.delivery import effects_pass
from kernel.clock import authority_now
from runs import authority
from runs.models import Attempt, EffectIntent, Run, RunState, SkipReason
from schedules.models import Schedule
from tests.authority_steps import create_schedule, make_due, publish, stage, start_run, succeeded_run
from tests.factories import make_tenant

# What fills the next 24 hours: three schedules every quarter hour (short), one hourly at :30 (long).
FORECAST_RULES = [("*/15 * * * *", "demo.sleep")] * 3 + [("30 * * * *", "demo.export")]
LATE_SECONDS = (2.0, 4.0, 30.0)  # one run over the 10 s objective


@dataclass
class World:
    tenant: object
    staff: object
    late_runs: list
    report_run: Run
    running_run: Run
    uncertain: EffectIntent
    forecast_schedules: list


def staff_user(username="operator", password="console-pw"):
    return get_user_model().objects.create_user(username, f"{username}@example.com", password, is_staff=True)


def seed_world() -> World:
    # The forecast schedules below come due at the next quarter hour: a history seeded after it
    # (the `history` fixture, right after this) would claim their runs instead of its own.
    _wait_out_quarter_end(WORLD_AND_HISTORY)
    tenant = make_tenant("acme", job_types=["demo.sleep", "demo.export", "report.sales"])
    late = [_started_late(tenant, seconds, index) for index, seconds in enumerate(LATE_SECONDS)]
    report = succeeded_run(tenant, effects={"email": {"to": ["stall@example.com"]}})
    effects_pass()
    running = _started_late(tenant, 0.5, 99)
    authority.record_progress(run_id=running.id, attempt_id=running.current_attempt_id, fence=running.fence,
                              fraction=0.4, message="40 of 100 regions")
    forecast = [
        create_schedule(tenant, cron=cron, job_type=job_type, name=f"wave-{index}", params={"seconds": 0})
        for index, (cron, job_type) in enumerate(FORECAST_RULES)
    ]
    return World(tenant, staff_user(), late, report, Run.objects.get(id=running.id),
                 EffectIntent.objects.get(run=report), forecast)


def _started_late(tenant, seconds: float, index: int) -> Run:
    schedule = create_schedule(tenant, name=f"late-{index}")
    instant = make_due(schedule, ago=timedelta(seconds=seconds))
    authority.materialize_due()
    run = authority.claim(worker_label="console-test")
    assert run.schedule_id == schedule.id and run.scheduled_at == instant
    return run


def lateness_of(runs) -> list[float]:
    return sorted((Run.objects.get(id=r.id).started_at - Run.objects.get(id=r.id).scheduled_at).total_seconds()
                  for r in runs)


# A quarter-hourly schedule in New York whose last eight instants, oldest first, went so; the
# eighth is running now.
HISTORY = ("succeeded", "succeeded", "succeeded", "succeeded", "failed", "skipped", "failed", "running")
QUARTER = timedelta(minutes=15)
QUARTER_END = timedelta(seconds=30)
WORLD_AND_HISTORY = timedelta(seconds=60)  # both seeded well within it, even beside another test process
FAILURE = "partner API answered 503"


def seed_history(tenant) -> Schedule:
    """`billing-sync`, every 15 minutes in America/New_York, with HISTORY through the real
    authority (claims, results, failures; the skipped instant as the scanner writes it), each
    run moved onto its quarter hour as time passing would have put it."""
    schedule = create_schedule(tenant, cron="*/15 * * * *", name="billing-sync", zone="America/New_York")
    current = _this_quarter()
    first = current - QUARTER * (len(HISTORY) - 1)
    for index, state in enumerate(HISTORY):
        at = first + QUARTER * index
        if state == "skipped":
            Run.objects.create(schedule=schedule, tenant=tenant, revision=1, job_type="demo.sleep",
                               resource_class="short", state=RunState.SKIPPED, skip_reason=SkipReason.MISFIRE,
                               skipped_count=1, skipped_through=at, scheduled_at=at, due_at=at, created_at=at,
                               finished_at=at + timedelta(minutes=2))
            continue
        run = start_run(schedule)
        if state == "succeeded":
            publish(run, stage(run, b"ok\n"))
        elif state == "failed":
            authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                               error=FAILURE)
        started = at + timedelta(seconds=1.5 + index)
        finished = None if state == "running" else started + timedelta(seconds=20 + 5 * index)
        Run.objects.filter(id=run.id).update(scheduled_at=at, due_at=at, created_at=at, started_at=started,
                                             finished_at=finished)
        Attempt.objects.filter(run_id=run.id).update(started_at=started, finished_at=finished)
    Schedule.objects.filter(id=schedule.id).update(next_run_at=current + QUARTER)
    schedule.refresh_from_db()
    return schedule


def _this_quarter():
    """The start of the quarter hour now is in. Within QUARTER_END of the next one, that one,
    once it has begun: a page read after the quarter turned would find the first planned
    instant already past."""
    now = _wait_out_quarter_end(QUARTER_END)
    return now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)


def _wait_out_quarter_end(margin: timedelta):
    """Authority time now, after waiting for the next quarter hour when it is closer than ``margin``."""
    now = authority_now()
    current = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    if current + QUARTER - now < margin:
        # A second past the turn: an instant made due just before now (start_run's 10 ms ago)
        # must not precede it, or materializing it would also materialize the turn's instant.
        time.sleep((current + QUARTER - now).total_seconds() + 1)
        return _wait_out_quarter_end(margin)  # past the turn now, unless the sleep ended a hair early
    return now
