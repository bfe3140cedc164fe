"""Finishing a run and making runs claimable again: the state changes shared by several
operations (completion, the sweep, cancellation, backfill, materialization). Callers hold
the schedule and run locks."""

from schedules import recurrence
from schedules.models import Schedule
from schedules.selectors import occurrences_left
from runs.overlap import Step, admit, takes_guard
from runs.authority.statements.rows import transition
from runs.models import ACTIVE_STATES, UNFINISHED, Outbox, OutboxKind, PendingReason, Run, RunState


def dispatch_row(run_id: str, count: int, resource_class: str, now) -> dict:
    """The outbox row of a run's ``count``-th dispatch intent; each has its own action key."""
    return {
        "kind": OutboxKind.DISPATCH,
        "action_key": f"dispatch-{run_id}" if count == 1 else f"dispatch-{run_id}-{count}",
        "run_id": run_id,
        "resource_class": resource_class,
        "created_at": now,
    }


def dispatch_intent(run: Run, now) -> Outbox:
    """A fresh dispatch outbox row (unsaved) for a run being made claimable again."""
    run.dispatch_count += 1
    return Outbox(**dispatch_row(run.id, run.dispatch_count, run.resource_class, now))


def finish_run(schedule: Schedule, run: Run, state: str, now, *, error: str = "", **changes) -> list[Outbox]:
    """Move a run to a terminal state in one guarded statement, together with ``changes``
    (the result pointer, cancellation flags), release its guard and free what waited on it.

    Returns outbox rows to insert (the promoted waiter's dispatch intent), unsaved.
    """
    if error:
        changes["error"] = error[:10000]
    released = run.holds_guard
    # Written now so the partial unique index sees the guard released before a waiter takes it.
    transition(
        run, {"state__in": ACTIVE_STATES},
        state=state, pending_reason=PendingReason.NONE, finished_at=now, holds_guard=False, **changes,
    )
    outbox = []
    schedule_changes = []
    if released and schedule.active_run_id == run.id:
        schedule.active_run = None
        schedule_changes.append("active_run")
    policy = schedule.overlap_policy
    # Only a guarded policy keeps waiters, and only a free guard lets the oldest one start.
    if takes_guard(policy) and admit(policy, guard=schedule.active_run_id, new=False) is Step.START:
        waiter = (
            Run.objects.select_for_update()
            .filter(UNFINISHED, schedule=schedule, state=RunState.PENDING, pending_reason=PendingReason.OVERLAP)
            .order_by("scheduled_at", "id")
            .first()
        )
        if waiter is not None:
            outbox.append(dispatch_intent(waiter, now))
            transition(
                waiter, {"state": RunState.PENDING, "pending_reason": PendingReason.OVERLAP},
                state=RunState.QUEUED, pending_reason=PendingReason.NONE, due_at=min(waiter.due_at, now),
                dispatch_count=waiter.dispatch_count,
            )
    if (
        schedule.recurrence.get("kind") == "after_completion"
        and not schedule.paused
        and schedule.deleted_at is None
        and schedule.next_run_at is None
        and run.trigger == "schedule"
    ):
        rule = recurrence.parse_rule(schedule.recurrence).within(schedule.active_from, schedule.active_until)
        schedule.next_run_at = recurrence.next_after(rule, now) if occurrences_left(schedule) != 0 else None
        schedule_changes.append("next_run_at")
    if schedule_changes:
        schedule.save(update_fields=schedule_changes)
    return outbox
