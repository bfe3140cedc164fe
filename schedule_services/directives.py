"""Occurrence directives: skip, hold or annotate one future instant of a schedule.

A directive is written only under the schedule's row lock and only while its instant is
not materialized; the transaction that materializes the instant reads it under the same
lock (runs.authority.materialize.build_wave), or, for an armed timer, is refused by the
schedule's directive_seq having moved (runs/authority/armed_timers.py). So a directive and the
scanner racing on one instant end in one outcome: applied, or refused with 409.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from kernel.clock import authority_now, instant as iso
from kernel.errors import InvalidRequest, InvalidState, NotAnOccurrence, NotFound, QuotaExceeded
from runs.authority.locks import lock_schedule
from runs.models import Run, Trigger
from schedules import recurrence
from schedules.audit import Actor, UNNAMED_API, audit_record
from schedules.models import AuditAction, DirectiveAction, MAX_DIRECTIVES, OccurrenceDirective, Schedule
from schedules.selectors import occurrences_left, schedule_rule

HORIZON = timedelta(days=366)  # directives and the occurrence listing reach this far ahead
MAX_OCCURRENCES = 1000  # per page of GET /schedules/{id}/occurrences
DIFF_DAYS = 30  # an edit's instantsDiff covers this many days
MAX_DIFF = 200  # instants per side of an instantsDiff
DIFF_WALK = 5000
# How many instants ahead of the schedule's next run the listing walks to find where its
# endAfterOccurrences ends it; a schedule with more left than this is listed without its end.
COUNT_WALK = 100_000


def is_rule_instant(rule: recurrence.Rule | None, at: datetime) -> bool:
    """Whether ``rule`` (in its window) produces exactly ``at``; an after_completion rule
    has no instants known ahead."""
    if rule is None or rule.kind == "after_completion":
        return False
    return recurrence.next_after(rule, at - timedelta(microseconds=1)) == at


def materialized(schedule: Schedule, at: datetime) -> bool:
    """Whether ``at`` is behind the schedule (locked): a run exists for it, or the scanner
    has moved past it (its first instant not yet materialized is later, or it has none)."""
    floor = schedule.resume_from if schedule.paused else schedule.next_run_at
    if floor is None or at < floor:
        return True
    return Run.objects.filter(schedule_id=schedule.id, scheduled_at=at, trigger=Trigger.SCHEDULE).exists()


def directive_put(*, tenant, schedule_id: str, at: datetime, action: str, note: str = "",
                  actor: Actor = UNNAMED_API) -> OccurrenceDirective:
    """Set the directive of one future rule instant (replacing one there). NotAnOccurrence
    when the rule does not produce it; InvalidState once it is materialized or passed;
    QuotaExceeded past MAX_DIRECTIVES on the schedule."""
    if action not in DirectiveAction.values:
        raise InvalidRequest(f"action must be one of {', '.join(DirectiveAction.values)}", field="action")
    with transaction.atomic(durable=True):
        schedule = lock_schedule(schedule_id, tenant=tenant)
        now = authority_now()
        _check_instant(schedule, at, now)
        directive = OccurrenceDirective.objects.filter(schedule=schedule, instant=at).first()
        if directive is None:
            if OccurrenceDirective.objects.filter(schedule=schedule).count() >= MAX_DIRECTIVES:
                raise QuotaExceeded(
                    f"the schedule has {MAX_DIRECTIVES} directives, the most it may hold; remove some first",
                    details={"quota": "maxDirectives", "limit": MAX_DIRECTIVES},
                )
            directive = OccurrenceDirective(schedule=schedule, tenant_id=schedule.tenant_id, instant=at)
        directive.action, directive.note, directive.created_at = action, note, now
        directive.actor_kind, directive.actor, directive.orphaned_at = actor.kind, actor.name, None
        directive.save()
        _changed(schedule)
        audit_record(schedule, actor=actor, action=action, at=now, instant=iso(at), note=note or None)
    return directive


def directive_delete(*, tenant, schedule_id: str, at: datetime, actor: Actor = UNNAMED_API) -> None:
    """Remove the directive of ``at``: NotFound without one, InvalidState once the instant
    is materialized (it was applied); an orphaned directive can always be removed."""
    with transaction.atomic(durable=True):
        schedule = lock_schedule(schedule_id, tenant=tenant)
        directive = OccurrenceDirective.objects.filter(schedule=schedule, instant=at).first()
        if directive is None:
            raise NotFound("no directive at this instant")
        now = authority_now()
        if directive.orphaned_at is None and (at <= now or materialized(schedule, at)):
            raise InvalidState("this occurrence is already materialized: its directive was applied")
        directive.delete()
        _changed(schedule)
        audit_record(schedule, actor=actor, action=AuditAction.CLEAR, at=now, instant=iso(at))


def _check_instant(schedule: Schedule, at: datetime, now: datetime) -> None:
    if at > now + HORIZON:
        raise InvalidRequest(f"a directive reaches at most {HORIZON.days} days ahead", field="instant")
    rule = schedule_rule(schedule)
    if not is_rule_instant(rule, at):
        raise NotAnOccurrence(f"the schedule's rule does not produce {iso(at)}", details={"field": "instant"})
    if (end := count_end(schedule, rule, at)) is not None and at > end:
        raise NotAnOccurrence(f"the schedule ends (endAfterOccurrences) before {iso(at)}",
                              details={"field": "instant"})
    if at <= now or materialized(schedule, at):
        raise InvalidState("this occurrence is already materialized (or passed); a directive can no longer apply")


def _changed(schedule: Schedule) -> None:
    """An armed timer read before this change no longer matches the row."""
    Schedule.objects.filter(id=schedule.id).update(directive_seq=F("directive_seq") + 1)


@dataclass
class Occurrence:
    at: datetime
    local: str | None
    directive: OccurrenceDirective | None
    run_id: str | None = None
    state: str | None = None


def occurrences_between(schedule: Schedule, start: datetime, end: datetime, limit: int) -> list[Occurrence]:
    """The schedule's rule instants in ``[start, end]`` (at most ``limit``), each with its
    directive and, once materialized, its run."""
    rule = schedule_rule(schedule)
    if rule is None or rule.kind == "after_completion":
        return []
    instants = recurrence.instants_between(rule, start - timedelta(microseconds=1), end, limit)
    if not instants:
        return []
    directives = {d.instant: d for d in OccurrenceDirective.objects.filter(
        schedule=schedule, instant__gte=instants[0], instant__lte=instants[-1], orphaned_at__isnull=True)}
    runs = dict(Run.objects.filter(
        schedule_id=schedule.id, trigger=Trigger.SCHEDULE, scheduled_at__gte=instants[0],
        scheduled_at__lte=instants[-1]).values_list("scheduled_at", "id"))
    states = dict(Run.objects.filter(id__in=runs.values()).values_list("id", "state")) if runs else {}
    end = count_end(schedule, rule, instants[-1])
    return [Occurrence(at, recurrence.local_rendering(rule, at), directives.get(at), runs.get(at),
                       states.get(runs.get(at)))
            for at in instants if at in runs or end is None or at <= end]


def count_end(schedule: Schedule, rule: recurrence.Rule, until: datetime) -> datetime | None:
    """The last rule instant the schedule's endAfterOccurrences lets it materialize, when
    that is not after ``until`` (the instants it has left are counted from its next run on,
    its resume point while paused); None when nothing ends it by then. Once it has none left,
    a moment before its next run (or ``until``'s distant past) is the end."""
    left = occurrences_left(schedule)
    if left is None:
        return None
    floor = schedule.resume_from if schedule.paused else schedule.next_run_at
    if left == 0 or floor is None:
        return recurrence.EARLIEST
    walked = recurrence.instants_between(rule, floor - timedelta(microseconds=1), until, min(left, COUNT_WALK))
    return walked[-1] if len(walked) == left else None


def orphaned_directives(schedule: Schedule) -> list[Occurrence]:
    """Directives an edit left without an instant of the rule, by instant."""
    return orphaned_occurrences(
        schedule, OccurrenceDirective.objects.filter(schedule=schedule, orphaned_at__isnull=False).order_by("instant"))


def orphaned_occurrences(schedule: Schedule, directives) -> list[Occurrence]:
    """The occurrences of orphaned ``directives``, on the wall clock of the schedule's rule."""
    rule = schedule_rule(schedule)
    zone = rule.timezone if rule is not None else "UTC"
    return [Occurrence(d.instant, recurrence.render_local(zone, d.instant), d) for d in directives]


def reconcile_directives(schedule: Schedule, now: datetime) -> list[OccurrenceDirective]:
    """After an edit (schedule locked, its new rule and window saved on the object): the
    directives of coming instants the new rule no longer produces become orphaned (returned),
    orphaned ones it produces again are adopted back."""
    rule = schedule_rule(schedule)
    orphaned, adopted = [], []
    for directive in OccurrenceDirective.objects.filter(schedule=schedule, instant__gt=now):
        produced = is_rule_instant(rule, directive.instant)
        if directive.orphaned_at is None and not produced:
            directive.orphaned_at = now
            orphaned.append(directive)
        elif directive.orphaned_at is not None and produced:
            directive.orphaned_at = None
            adopted.append(directive)
    if orphaned or adopted:
        OccurrenceDirective.objects.bulk_update(orphaned + adopted, ["orphaned_at"])
        _changed(schedule)
    return orphaned


def instants_diff(before: recurrence.Rule | None, after: recurrence.Rule | None, now: datetime) -> dict:
    """The instants an edit adds and removes over the next DIFF_DAYS days (at most MAX_DIFF
    each), as ISO text. A rule walking more than DIFF_WALK instants in that span is compared
    up to where both walks reached."""
    end = now + timedelta(days=DIFF_DAYS)

    def instants(rule):
        if rule is None or rule.kind == "after_completion":
            return []
        return recurrence.instants_between(rule, now, end, DIFF_WALK)

    old, new = instants(before), instants(after)
    for walked in (old, new):
        if len(walked) == DIFF_WALK:
            end = min(end, walked[-1])
    old_set, new_set = set(old), set(new)
    return {"added": [iso(at) for at in new if at <= end and at not in old_set][:MAX_DIFF],
            "removed": [iso(at) for at in old if at <= end and at not in new_set][:MAX_DIFF]}
