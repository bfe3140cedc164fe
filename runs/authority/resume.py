"""Resuming a paused schedule: the instants missed while paused meet its misfire policy.

The missed instants are planned before the schedule is locked (runs/authority/planning.py):
a long pause of a fast rule is a long walk, and the lock must not wait for it. The resume
takes effect at the authority time read before planning; instants after it are ordinary
ones, judged by the scanner.
"""

from django.db import transaction

from schedules import recurrence
from schedules.locks import lock_schedule
from schedules.models import Schedule, Tenant
from schedules.selectors import schedule_first_due
from runs.authority.materialize import catch_up_on_resume
from runs.authority.planning import Planned, WavePlans
from runs.models import UNFINISHED, Trigger
from scheduler_project.clock import authority_now
from scheduler_project.errors import InvalidState

# A concurrent pause, resume or edit between planning and locking means planning again.
RESUME_TRIES = 3
# What a catch-up plan is made from: the same pause episode, rule and misfire settings.
PLANNED_FROM = ("paused", "paused_at", "resume_from", "recurrence", "misfire_policy", "misfire_grace_seconds")


def schedule_resume(*, tenant: Tenant, schedule_id: str) -> Schedule:
    """Resume applies the misfire policy to the instants missed while paused."""
    with transaction.atomic(durable=True):
        pass  # refused inside a caller's transaction, before planning, as the one below would be
    for _ in range(RESUME_TRIES):
        seen, now, planned = _plan_resume(tenant, schedule_id)
        with transaction.atomic(durable=True):
            schedule = lock_schedule(schedule_id, tenant=tenant)
            if not schedule.paused:
                return schedule
            if seen is None or any(getattr(schedule, name) != getattr(seen, name) for name in PLANNED_FROM):
                continue
            _resume(schedule, now, planned)
            return schedule
    raise InvalidState("the schedule changed while it was being resumed; resume it again")


def _plan_resume(tenant: Tenant, schedule_id: str) -> tuple[Schedule | None, object, Planned | None]:
    """Outside any transaction: the schedule as read, the resume's authority time, and the
    catch-up plan of the instants it missed while paused (None when there are none)."""
    now = authority_now()
    seen = Schedule.objects.filter(id=schedule_id, tenant=tenant, deleted_at__isnull=True).first()
    if seen is None or not seen.paused or seen.resume_from is None or seen.resume_from > now:
        return seen, now, None
    return seen, now, WavePlans(now, from_pause=True).plan(seen)


def _resume(schedule: Schedule, now, planned: Planned | None) -> None:
    """Unpause the locked ``schedule`` at authority time ``now``, as planned."""
    rule = recurrence.parse_rule(schedule.recurrence)
    schedule.paused = False
    if planned is not None:
        catch_up_on_resume(schedule, authority_now(), planned)  # sets next_run_at past the missed instants
    elif schedule.resume_from is not None:
        schedule.next_run_at = schedule.resume_from
    elif rule.kind != "after_completion" or not schedule.runs.filter(
        UNFINISHED, trigger=Trigger.SCHEDULE
    ).exists():
        # An after_completion schedule whose last run ended while paused is due now.
        schedule.next_run_at = schedule_first_due(schedule, rule, now)
    schedule.paused_at = schedule.resume_from = None
    schedule.save()
