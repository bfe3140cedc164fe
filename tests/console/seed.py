"""A console world seeded through the services and the real authority: schedules whose
rules fill the next 24 hours, runs that started late by known amounts, a succeeded report
whose email is `uncertain` (the SMTP sink stalls after accepting it), a running run with
progress."""

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model

from effects.delivery import effects_pass
from effects.models import EffectIntent
from runs import authority
from runs.models import Run
from tests.authority_steps import create_schedule, make_due, succeeded_run
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
