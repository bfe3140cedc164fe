"""Resuming a paused schedule: the instants missed while paused meet its misfire policy.

The missed instants are planned before the schedule is locked (runs/authority/catch_up_bounds.py):
a long pause of a fast rule is a long walk, and the lock must not wait for it. The resume
takes effect at the authority time read before planning; instants after it are ordinary
ones, judged by the scanner.
"""

import logging

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from schedules import recurrence
from schedules.audit import SCHEDULER, UNNAMED_API, Actor, audit_record
from runs.authority.locks import lock_schedule
from schedules.models import AuditAction, BulkAction, Schedule, Tenant
from schedules.selectors import schedule_first_due, schedule_rule
from runs.authority.materialize import catch_up_on_resume
from runs.authority.catch_up_bounds import Planned, WavePlans
from runs.models import UNFINISHED, Trigger
from kernel.clock import authority_now
from kernel.errors import InvalidState, NotFound

log = logging.getLogger(__name__)

# A concurrent pause, resume or edit between planning and locking means planning again.
RESUME_TRIES = 3
# What a catch-up plan is made from: the same pause episode, rule and misfire settings.
PLANNED_FROM = ("paused", "paused_at", "resume_from", "recurrence", "misfire_policy", "misfire_grace_seconds")


def schedule_resume(*, tenant: Tenant, schedule_id: str, actor: Actor = UNNAMED_API) -> Schedule:
    """Resume applies the misfire policy to the instants missed while paused."""
    return _resume_if(tenant, schedule_id, actor=actor)[0]


def _resume_if(tenant, schedule_id: str, *, actor: Actor, still=None, **details) -> tuple[Schedule, bool]:
    """Resume the schedule if it is paused and, given `still(schedule, now)`, that holds
    under its lock (the pause is still the one being ended); (the schedule, whether this
    call resumed it). Every resume path, manual, timed or bulk, is this one."""
    with transaction.atomic(durable=True):
        pass  # refused inside a caller's transaction, before planning, as the one below would be
    for _ in range(RESUME_TRIES):
        seen, now, planned = _plan_resume(tenant, schedule_id)
        with transaction.atomic(durable=True):
            schedule = lock_schedule(schedule_id, tenant=tenant)
            if not schedule.paused or (still is not None and not still(schedule, authority_now())):
                return schedule, False
            if seen is None or any(getattr(schedule, name) != getattr(seen, name) for name in PLANNED_FROM):
                continue
            _resume(schedule, now, planned)
            audit_record(schedule, actor=actor, action=AuditAction.RESUME, at=now, **details)
            return schedule, True
    raise InvalidState("the schedule changed while it was being resumed; resume it again")


def _pause_ended_by(action_id: str | None):
    """The check under the lock that the pause being ended is still the one found: its end
    has come (database time) and it belongs to the same bulk action (or to none)."""
    def still(schedule: Schedule, now) -> bool:
        return (schedule.paused_until is not None and schedule.paused_until <= now
                and schedule.pause_action_id == action_id)
    return still


def _end_pause(schedule_id: str, tenant_id: str, action_id: str | None, actor: Actor, **details) -> bool:
    """Resume one schedule whose pause has ended, if it still has; False when another
    resumer, an edit or a new pause came first (a later scan pass looks again)."""
    try:
        return _resume_if(Tenant(id=tenant_id), schedule_id, actor=actor, still=_pause_ended_by(action_id),
                          **details)[1]
    except (InvalidState, NotFound) as exc:
        log.info("resume of %s left for later: %s", schedule_id, exc)
        return False


def resume_due_pauses(*, buckets=None, batch_size: int = 100) -> int:
    """End the pauses due at database time (a scan pass's first step): timed pauses, and the
    pauses a bulk resume ended. Each schedule resumes as a manual resume would, exactly once
    whichever scanners race for it (the pause is checked again under the schedule's lock).
    Returns how many this call resumed. While none is due this is one look-up of a partial
    index."""
    due = Schedule.objects.filter(paused_until__lte=Now(), paused=True, deleted_at__isnull=True)
    if buckets is not None:
        due = due.filter(bucket__in=list(buckets))
    rows = list(due.order_by("paused_until", "id").values_list("id", "tenant_id", "pause_action_id")[:batch_size])
    # A bulk action's pause ended by its resume is that resume's, by whoever asked for it.
    resumers = {action.id: Actor(action.resumed_by_kind, action.resumed_by) for action in
                BulkAction.objects.filter(id__in={a for _, _, a in rows if a}, resumed_at__isnull=False)}
    resumed = 0
    for schedule_id, tenant_id, action_id in rows:
        if action_id in resumers:
            resumed += _end_pause(schedule_id, tenant_id, action_id, resumers[action_id], actionId=action_id)
        else:
            resumed += _end_pause(schedule_id, tenant_id, action_id, SCHEDULER, timed=True, actionId=action_id)
    return resumed


RESUME_ACTION_BATCH = 500  # schedules whose pause one transaction ends
RESUME_INLINE = 100  # of those, resumed within the request; the scan passes resume the rest


def schedules_resume_action(*, tenant: Tenant, action_id: str, actor: Actor = UNNAMED_API) -> tuple[BulkAction, int]:
    """End the pauses of the schedules the bulk action `action_id` paused that are still
    paused by it (one resumed by hand, paused again since, or whose timed pause has ended
    is left alone); (the action, how many pauses this call ended).

    Set-based and batched: one guarded UPDATE per RESUME_ACTION_BATCH schedules makes
    their pause end now (paused_until), so no transaction locks more than a batch. The
    first RESUME_INLINE are then resumed here, the rest by the scan passes (any scanner,
    resume_due_pauses) within their interval, each as a manual resume would, recorded as
    this caller's resume."""
    action = BulkAction.objects.filter(id=action_id, tenant=tenant).first()
    if action is None:
        raise NotFound("no such action")
    BulkAction.objects.filter(id=action.id).update(
        resumed_at=authority_now(), resumed_by_kind=actor.kind, resumed_by=actor.name
    )
    ended, inline, after = 0, [], ""
    while True:
        with transaction.atomic():
            page = list(Schedule.objects.filter(tenant=tenant, pause_action=action, paused=True, id__gt=after)
                        .order_by("id").values_list("id", flat=True)[:RESUME_ACTION_BATCH])
            if not page:
                break
            after = page[-1]
            now = authority_now()
            # Guarded: still paused by this action, its end not yet come (a repeat counts none twice).
            still = (Schedule.objects.filter(id__in=page, pause_action=action, paused=True)
                     .filter(Q(paused_until__isnull=True) | Q(paused_until__gt=now)))
            ids = list(still.select_for_update().order_by("id").values_list("id", flat=True))
            Schedule.objects.filter(id__in=ids).update(paused_until=now)
        ended += len(ids)
        inline.extend(ids[:RESUME_INLINE - len(inline)])
    for schedule_id in inline:
        _end_pause(schedule_id, tenant.id, action.id, actor, actionId=action.id)
    return action, ended


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
    rule = schedule_rule(schedule) or recurrence.parse_rule(schedule.recurrence)
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
    schedule.paused_at = schedule.resume_from = schedule.paused_until = schedule.pause_action = None
    schedule.pause_reason = ""
    schedule.save()
