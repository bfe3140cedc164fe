"""The promises a chaos scenario must leave intact, checked from the authoritative tables.

Whatever was killed, paused or disconnected, afterwards:

* nothing is lost: every due instant of a schedule in the window has an occurrence that
  reached a terminal state, or is recorded as skipped with a reason; every run-once
  request is still there and terminal;
* nothing is doubled or invented: no (schedule, instant) has two occurrences, and every
  occurrence is at an instant of its schedule's rule;
* every succeeded run has exactly one canonical result: its accepted attempt's referenced
  object, which exists in the store at the recorded version with the recorded checksum;
* no accepted transition came from a stale fence: per run, attempts hold strictly
  increasing fences, each ended before the next was granted, and only the last one can
  have been accepted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from objectstore import get_object_store
from runs.integrity import missing_or_altered
from runs.models import (
    TERMINAL_STATES,
    Attempt,
    AttemptState,
    ObjectState,
    Run,
    RunState,
    StoredObject,
    Trigger,
)
from schedules import recurrence
from schedules.models import Schedule

SHOWN = 5  # examples per kind of problem in an assertion message


@dataclass
class InvariantReport:
    runs: int = 0
    by_state: Counter = field(default_factory=Counter)
    instants: int = 0  # due instants of recurring schedules in the window
    attempts: int = 0
    recovered: int = 0  # succeeded after at least one attempt that was not accepted
    orphan_uploads: int = 0  # uploads of attempts that were never accepted: unreferenced
    lost: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    invented: list = field(default_factory=list)  # occurrences at instants their rule never produces
    not_terminal: list = field(default_factory=list)
    result_problems: list = field(default_factory=list)
    fence_problems: list = field(default_factory=list)

    @property
    def problems(self) -> dict[str, list]:
        kinds = {
            "lost": self.lost,
            "duplicates": self.duplicates,
            "invented": self.invented,
            "not terminal": self.not_terminal,
            "results": self.result_problems,
            "fences": self.fence_problems,
        }
        return {kind: found for kind, found in kinds.items() if found}

    def assert_ok(self) -> None:
        problems = self.problems
        if problems:
            lines = [f"{kind}: {len(found)}, e.g. {found[:SHOWN]}" for kind, found in problems.items()]
            raise AssertionError("invariants violated:\n  " + "\n  ".join(lines))


def check_invariants(
    *,
    schedule_ids,
    window: tuple[datetime, datetime] | None = None,
    recurring_ids=(),
    run_ids=(),
    store=None,
) -> InvariantReport:
    """Check every run of ``schedule_ids``.

    ``recurring_ids`` are schedules whose due instants in ``window`` (inclusive) must all be
    accounted for; ``run_ids`` are run-once requests that must all exist.
    """
    report = InvariantReport()
    runs = list(Run.objects.filter(schedule_id__in=list(schedule_ids)).order_by("schedule_id", "scheduled_at", "id"))
    report.runs = len(runs)
    report.by_state = Counter(r.state for r in runs)

    missing_requests = set(run_ids) - {r.id for r in runs}
    report.lost += [f"run-once request {run_id} has no run" for run_id in sorted(missing_requests)]
    if recurring_ids:
        assert window is not None, "recurring schedules need a window"
        _check_instants(report, runs, list(recurring_ids), window)
    _check_no_duplicates(report, runs)
    for run in runs:
        if run.state not in TERMINAL_STATES:
            report.not_terminal.append(f"{run.id} is {run.state}")
        elif run.state == RunState.SKIPPED and not run.skip_reason:
            report.not_terminal.append(f"{run.id} is skipped without a reason")

    attempts = defaultdict(list)
    for attempt in Attempt.objects.filter(run__in=runs).order_by("run_id", "number"):
        attempts[attempt.run_id].append(attempt)
    report.attempts = sum(len(a) for a in attempts.values())
    objects = defaultdict(list)
    for obj in StoredObject.objects.filter(run__in=runs):
        objects[obj.run_id].append(obj)
    for run in runs:
        _check_fences(report, run, attempts[run.id])
        _check_result(report, run, objects[run.id])
        if run.state == RunState.SUCCEEDED and len(attempts[run.id]) > 1:
            report.recovered += 1
        report.orphan_uploads += sum(
            1 for o in objects[run.id] if o.version_id and o.attempt_id != run.accepted_attempt_id
        )
    _check_objects_exist(report, [r for r in runs if r.state == RunState.SUCCEEDED], store or get_object_store())
    return report


def due_instants(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's rule's instants in [start, end]."""
    rule = recurrence.parse_rule(schedule.recurrence)
    instants, cursor = [], start - timedelta(microseconds=1)
    while True:
        instant = recurrence.next_after(rule, cursor)
        if instant is None or instant > end:
            return instants
        instants.append(instant)
        cursor = instant


def _check_instants(report, runs, recurring_ids, window) -> None:
    start, end = window
    by_schedule = defaultdict(list)
    for run in runs:
        if run.trigger == Trigger.SCHEDULE:
            by_schedule[run.schedule_id].append(run)
    for schedule in Schedule.objects.filter(id__in=recurring_ids):
        expected = due_instants(schedule, start, end)
        report.instants += len(expected)
        occurrences = by_schedule[schedule.id]
        exact = {r.scheduled_at for r in occurrences}
        ranges = [(r.scheduled_at, r.skipped_through) for r in occurrences if r.skipped_count]
        for instant in expected:
            if instant in exact or any(first <= instant <= last for first, last in ranges):
                continue
            report.lost.append(f"{schedule.id} @ {instant.isoformat()}")
        # An occurrence at an instant its rule never produces would be an invented run.
        valid = set(due_instants(schedule, min(exact, default=start), max(exact, default=end)))
        report.invented += [f"{r.id} of {schedule.id} at a non-instant {r.scheduled_at.isoformat()}"
                        for r in occurrences if r.scheduled_at not in valid]


def _check_no_duplicates(report, runs) -> None:
    seen = Counter((r.schedule_id, r.scheduled_at) for r in runs if r.trigger == Trigger.SCHEDULE)
    report.duplicates += [f"{sid} @ {at.isoformat()} x{n}" for (sid, at), n in seen.items() if n > 1]


def _check_fences(report, run: Run, attempts: list[Attempt]) -> None:
    problems = report.fence_problems
    if [a.number for a in attempts] != list(range(1, len(attempts) + 1)) or run.attempt_count != len(attempts):
        problems.append(f"{run.id}: attempt numbers {[a.number for a in attempts]}, count {run.attempt_count}")
    for before, after in zip(attempts, attempts[1:]):
        if after.fence <= before.fence:
            problems.append(f"{run.id}: fence {after.fence} after {before.fence}")
        # The authority grants a fence only once the previous holder's attempt has ended.
        if before.finished_at is None or before.finished_at > after.started_at:
            problems.append(f"{run.id}: attempt {before.number} still live when {after.number} was granted")
    if attempts and run.fence != attempts[-1].fence:
        problems.append(f"{run.id}: run fence {run.fence}, last attempt fence {attempts[-1].fence}")
    if run.state in TERMINAL_STATES and any(a.state == AttemptState.RUNNING for a in attempts):
        problems.append(f"{run.id}: {run.state} with an attempt still running")
    succeeded = [a for a in attempts if a.state == AttemptState.SUCCEEDED]
    if run.state == RunState.SUCCEEDED:
        # Only the newest fence could have been current when the result was accepted.
        if [a.id for a in succeeded] != [run.accepted_attempt_id] or attempts[-1].id != run.accepted_attempt_id:
            problems.append(f"{run.id}: accepted {run.accepted_attempt_id}, succeeded attempts "
                            f"{[a.number for a in succeeded]} of {len(attempts)}")
    elif succeeded or run.accepted_attempt_id:
        problems.append(f"{run.id}: {run.state} yet attempt(s) {[a.number for a in succeeded]} succeeded")


def _check_result(report, run: Run, objects: list[StoredObject]) -> None:
    canonical = [o for o in objects if o.state == ObjectState.REFERENCED]
    if run.state != RunState.SUCCEEDED:
        if canonical:
            report.result_problems.append(f"{run.id}: {run.state} but references {canonical[0].key}")
        return
    if len(canonical) != 1:
        report.result_problems.append(f"{run.id}: {len(canonical)} referenced objects")
        return
    obj = canonical[0]
    if (obj.key, obj.version_id, obj.checksum) != (run.result_key, run.result_version_id, run.result_checksum):
        report.result_problems.append(f"{run.id}: result pointer differs from its referenced object")
    if obj.attempt_id != run.accepted_attempt_id or obj.fence != run.fence:
        report.result_problems.append(f"{run.id}: canonical object from attempt {obj.attempt_id} fence {obj.fence}")


def _check_objects_exist(report, succeeded: list[Run], store) -> None:
    rows = [(run.result_key, run.result_version_id, run.result_checksum) for run in succeeded]
    report.result_problems += missing_or_altered(rows, store)
