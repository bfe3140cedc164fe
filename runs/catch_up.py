"""Which due instants run and which are recorded as skipped: misfire policy (pure)."""

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from schedules import recurrence

RUN_ALL_PER_CYCLE = 100  # run_all releases at most this many missed instants per scan cycle
SKIPPED_RECORDS_CAP = 1000  # past this, one range record stands for the older skipped instants
WALK_CAP = 1_000_000  # bound on instants examined in one catch-up, whatever the rule


@dataclass
class SkippedRange:
    first: datetime
    last: datetime
    count: int


@dataclass
class CatchUpPlan:
    run: list[datetime] = field(default_factory=list)
    skipped: list[datetime] = field(default_factory=list)
    skipped_range: SkippedRange | None = None
    next_run_at: datetime | None = None
    ended_by_count: bool = False  # its last instants were the schedule's endAfterOccurrences
    # The schedule's calendar: instants it excluded (and did not move) before the last instant
    # walked, with the excluding calendar; each run instant a calendar moved -> where from.
    calendar_skipped: list[tuple[datetime, str]] = field(default_factory=list)
    shifted_from: dict[datetime, datetime] = field(default_factory=dict)
    walked_through: datetime | None = None  # the last instant walked: where next_run_at was computed from


def plan_catch_up(
    rule: recurrence.Rule,
    first_due: datetime,
    now: datetime,
    *,
    policy: str,
    grace_seconds: int,
    all_missed: bool = False,
    max_instants: int | None = None,
    calendar_from: datetime | None = None,
) -> CatchUpPlan:
    """Decide the fate of every instant in [first_due, now].

    An instant is missed if ``all_missed`` (it fell while paused) or it is more than
    ``grace_seconds`` late. ``latest_only`` runs the latest missed instant unless an
    on-time one exists; ``skip`` skips every missed one; ``run_all`` runs all of them,
    at most RUN_ALL_PER_CYCLE per call (``next_run_at`` then stays in the past).
    Only instants in the rule's window count, at most ``max_instants`` of them (the
    schedule's endAfterOccurrences left): past those ``next_run_at`` is None.
    A rule under a calendar also lists the instants its calendar excluded after
    ``calendar_from`` (default: ``first_due``), up to the last instant walked.
    """
    plan = CatchUpPlan()
    if max_instants == 0:
        return plan
    if not recurrence.in_window(rule, first_due):  # a window edited since first_due was set
        plan.next_run_at = (recurrence.first_not_before(rule, first_due) if rule.kind == "after_completion"
                            else recurrence.next_after(rule, first_due))
        if plan.next_run_at is None or plan.next_run_at > now:
            return plan
        first_due = plan.next_run_at
    if rule.kind == "after_completion":
        return _plan_single(rule, first_due, now, policy, grace_seconds, all_missed, plan)

    grace = timedelta(seconds=grace_seconds)
    recent_missed: deque[datetime] = deque(maxlen=SKIPPED_RECORDS_CAP + 1)
    older: SkippedRange | None = None
    instant, walked, last_walked = first_due, 0, first_due
    limit = WALK_CAP if max_instants is None else min(WALK_CAP, max_instants)
    while instant is not None and instant <= now and walked < limit:
        if policy == "run_all" and len(plan.run) == RUN_ALL_PER_CYCLE:
            break
        walked += 1
        last_walked = instant
        missed = all_missed or now - instant > grace
        if policy == "run_all":
            plan.run.append(instant)
        elif missed:
            if len(recent_missed) == recent_missed.maxlen:
                dropped = recent_missed.popleft()
                older = _extend(older, dropped)
            recent_missed.append(instant)
        else:
            plan.run.append(instant)
        instant = recurrence.next_after(rule, instant)
    if walked == max_instants:
        instant, plan.ended_by_count = None, True  # the schedule's last occurrence: it ends
    elif walked == WALK_CAP and instant is not None and instant <= now:
        # Pathological backlog: account for the rest as skipped without enumerating it.
        older = _extend(older, instant)
        instant = recurrence.next_after(rule, now)

    if policy == "latest_only" and recent_missed and not plan.run:
        plan.run.append(recent_missed.pop())
    if len(recent_missed) > SKIPPED_RECORDS_CAP:
        older = _extend(older, recent_missed.popleft())
    plan.skipped = list(recent_missed)
    plan.skipped_range = older
    plan.next_run_at = instant
    if rule.calendar is not None and walked:
        _calendar_fates(rule, plan, calendar_from or first_due, last_walked)
    return plan


def _calendar_fates(rule, plan: CatchUpPlan, start: datetime, through: datetime) -> None:
    """The calendar's part of the plan: excluded instants in (start, through), and where the
    run instants were moved from."""
    plan.walked_through = through
    plan.calendar_skipped = recurrence.calendar_excluded(rule, start, through, limit=SKIPPED_RECORDS_CAP)
    for at in plan.run:
        moved = recurrence.calendar_shifted_from(rule, at)
        if moved is not None:
            plan.shifted_from[at] = moved


def _extend(span: SkippedRange | None, instant: datetime) -> SkippedRange:
    if span is None:
        return SkippedRange(first=instant, last=instant, count=1)
    span.last = instant
    span.count += 1
    return span


def _plan_single(rule, due, now, policy, grace_seconds, all_missed, plan):
    # after_completion has one due instant at a time; its successor is set on completion.
    missed = all_missed or (now - due).total_seconds() > grace_seconds
    if missed and policy == "skip":
        plan.skipped.append(due)
        plan.next_run_at = recurrence.next_after(rule, now)
    else:
        plan.run.append(due)
    return plan
