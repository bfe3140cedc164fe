"""Resuming a paused schedule: the instants missed while paused meet its misfire policy."""

from django.db import transaction

from schedules import recurrence
from schedules.locks import lock_schedule
from schedules.models import Schedule, Tenant
from runs.authority.materialize import catch_up_on_resume
from runs.models import ACTIVE_STATES, Trigger
from scheduler_project.clock import authority_now


def schedule_resume(*, tenant: Tenant, schedule_id: str) -> Schedule:
    """Resume applies the misfire policy to the instants missed while paused."""
    with transaction.atomic(durable=True):
        schedule = lock_schedule(schedule_id, tenant=tenant)
        if not schedule.paused:
            return schedule
        now = authority_now()
        rule = recurrence.parse_rule(schedule.recurrence)
        schedule.paused = False
        if schedule.resume_from is not None and schedule.resume_from <= now:
            catch_up_on_resume(schedule, now)  # sets next_run_at past the missed instants
        elif schedule.resume_from is not None:
            schedule.next_run_at = schedule.resume_from
        elif rule.kind != "after_completion" or not schedule.runs.filter(
            trigger=Trigger.SCHEDULE, state__in=ACTIVE_STATES
        ).exists():
            # An after_completion schedule whose last run ended while paused is due now.
            schedule.next_run_at = recurrence.first_not_before(rule, now)
        schedule.paused_at = schedule.resume_from = None
        schedule.save()
    return schedule
