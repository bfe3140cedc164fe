"""Armed timers: what a scanner reads for a timer before its instant, so that firing it is
one guarded statement: the near-term work prepared ahead (docs/design.md, "The life of a run", 1).

Arming reads a schedule row and its revision's payload text without any lock, seconds
before the instant. Firing decides with the same code as any materialization
(runs/authority/materialize.build_wave, at the firing transaction's authority time, with
the job types read then) and writes with statements.wave.schedules_write_wave_if_unchanged: only the
schedules whose row is still what was read (revision, next instant, directives, not
paused, not deleted, not locked by someone else) are moved on and get their occurrences. An edit
bumps the revision, and a revision's payload never changes, so nothing stale is written;
every schedule the guard leaves out, and every one not armed, takes the locking path.

Only schedules that fire on time and whose overlap policy takes no guard are fired armed:
for those the policy admits every new instant whatever runs (runs/overlap.py), so the
decision needs no read under the lock. A late timer (past the misfire grace, or past the
next instant) is planned under the lock like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from kernel.clock import authority_now
from runs.authority.materialize import (
    DueSchedule, MATERIALIZE_FIELDS, MaterializeStats, build_wave, committed, revision_texts,
)
from runs.authority.catch_up_bounds import WavePlans
from runs.authority.statements import dialect
from runs.authority.statements.outbox import outbox_notify
from runs.authority.statements.wave import schedules_read_live_among, schedules_write_wave_if_unchanged
from runs.models import RunState
from runs.overlap import takes_guard


@dataclass
class Armed:
    schedule: DueSchedule  # the row as read, unlocked
    text: str  # its revision's payload text
    revision: int
    next_run_at: object  # the instant it was armed for
    directive_seq: int  # the schedule's directives as read (schedule_services.directives)


def arm(ids: list[str]) -> dict[str, Armed]:
    """The schedules among ``ids`` that can be fired armed, read now, by id."""
    if not dialect.postgresql() or not ids:
        return {}  # the embedded SQLite fires through the locking path
    recurrences: dict[str, dict] = {}
    schedules = [DueSchedule(row, recurrences) for row in schedules_read_live_among(MATERIALIZE_FIELDS, ids)]
    # A schedule under calendars records excluded instants and moves next_run_from: the locking path.
    schedules = [s for s in schedules if not takes_guard(s.overlap_policy) and not s.calendar]
    texts = revision_texts(schedules)
    return {s.id: Armed(s, texts[s.id], s.revision, s.next_run_at, s.directive_seq) for s in schedules if s.id in texts}


def fire_armed(armed: list[Armed]) -> tuple[MaterializeStats, set[str]]:
    """One transaction: write the armed schedules that are due and on time, each only if its
    row is still as armed. Returns what it wrote and the ids of the schedules written."""
    with transaction.atomic(durable=True):
        now = authority_now()
        plans = WavePlans(now, recurrences={})
        due = [a for a in armed if a.next_run_at <= now and _on_time(plans.plan(a.schedule), a.next_run_at)]
        if not due:
            return MaterializeStats(), set()
        counted = {a.schedule.id: a.schedule.occurrences_materialized for a in due}
        wave = build_wave([a.schedule for a in due], now, plan_of=plans.planned,
                          texts={a.schedule.id: a.text for a in due})
        written = set(schedules_write_wave_if_unchanged(
            wave.runs, wave.outbox,
            expected=[(a.schedule.id, a.revision, a.next_run_at, a.directive_seq) for a in due],
            moves=[(a.schedule.id, a.schedule.next_run_at, a.schedule.occurrences_materialized - counted[a.schedule.id])
                   for a in due],
        ))
        if written and wave.outbox:
            outbox_notify()
        wave.record_shadow()
    stats = _written(wave.runs, written)
    committed(stats)
    return stats, written


def _on_time(planned, instant) -> bool:
    """Whether the plan is the armed instant alone, on time: what arming read decides it."""
    if planned is None:
        return False
    _, plan = planned
    return plan.run == [instant] and not plan.skipped and plan.skipped_range is None


def _written(runs: list[dict], written: set[str]) -> MaterializeStats:
    stats = MaterializeStats(schedules=len(written))
    for run in runs:
        if run["schedule_id"] in written:
            if run["state"] == RunState.QUEUED:
                stats.queued += 1
            elif run["state"] == RunState.SKIPPED:
                stats.skipped += 1
            else:
                stats.pending += 1
    return stats
