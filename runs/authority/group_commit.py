"""Group commit: the succeeded completions a worker process has ready at once, published in
one transaction. Each is still fence-checked on its own and refused on its own.

The common completion (a running attempt that owns its run, a staged object of its own,
a schedule whose policy keeps no guard) is written for the whole group by a few
statements over arrays. Any other (a repeat, a refusal, a guard to release or a waiter
to promote, a rule that runs after completion) goes through ``complete`` after the group
commits, which judges and answers it exactly as a single call would.
"""

import json
from typing import NamedTuple

from django.db import transaction

from runs.models import EffectIntent
from runs import metrics
from runs.authority.completion import complete, effect_intents
from runs.authority.owner import stale_reason
from runs.authority.statements.completions import COMPLETION_FIELDS, completions_lock, runs_publish_if_active
from runs.authority.statements.rows import TransitionConflict
from runs.authority.statements.schedules import schedules_lock_of_runs
from runs.models import ObjectState, RunState, StoredObject
from runs.overlap import takes_guard
from kernel.errors import DomainError
from kernel.failpoints import failpoint


class Success(NamedTuple):
    """A succeeded attempt's completion."""
    run_id: str
    attempt_id: str
    fence: int
    stored: StoredObject  # the staged object, as stage_results recorded it


class Completed(NamedTuple):
    run_id: str
    state: str
    result_checksum: str | None


Row = NamedTuple("Row", [(name, object) for name in COMPLETION_FIELDS])


def complete_succeeded(successes: list[Success]) -> list[Completed | Exception]:
    """Complete these succeeded attempts; per completion, in order, what the authority
    recorded or the refusal (StaleFence, InvalidState, NotFound) a single ``complete``
    would have raised. A database error raises for the group: nothing of it committed, and
    repeating it is safe (a repeated completion is answered with the saved run)."""
    answers: dict[int, Completed | Exception] = {}
    if successes:
        answers = _commit_group(successes)
    for i, success in enumerate(successes):
        if i not in answers:
            answers[i] = _complete_one(success)
    return [answers[i] for i in range(len(successes))]


def _complete_one(success: Success) -> Completed | Exception:
    stored = success.stored
    try:
        run = complete(run_id=success.run_id, attempt_id=success.attempt_id, fence=success.fence,
                       outcome="succeeded", object_key=stored.key, version_id=stored.version_id,
                       checksum=stored.checksum)
    except DomainError as exc:
        return exc
    return Completed(run.id, run.state, run.result_checksum)


def _commit_group(successes: list[Success]) -> dict[int, Completed]:
    """Publish, in one transaction, every completion of the group that is the common case;
    the answers of those. The rest are left to ``complete``."""
    by_run = {s.run_id: i for i, s in enumerate(successes)}
    with transaction.atomic(durable=True):
        schedules_lock_of_runs(list(by_run))
        rows = [Row(*row) for row in completions_lock(
            [s.run_id for s in successes], [s.attempt_id for s in successes], [s.stored.key for s in successes])]
        common = [(row, successes[by_run[row.run_id]]) for row in rows if _common(row, successes[by_run[row.run_id]])]
        if not common:
            return {}
        now = rows[0].now
        published = [
            (s.run_id, s.attempt_id, row.object_id, s.stored.key, s.stored.version_id, s.stored.checksum,
             row.object_size, row.object_content_type)
            for row, s in common
        ]
        written = runs_publish_if_active(published, now)
        if any(count != len(published) for count in written):
            raise TransitionConflict(f"group publication wrote {written} rows for {len(published)} completions")
        intents = [
            intent for row, s in common
            for intent in effect_intents(s.run_id, json.loads(row.effects or "null"), s.stored, now)
        ]
        EffectIntent.objects.bulk_create(intents)
    for row, _ in common:
        metrics.EXECUTION.labels(row.resource_class, "succeeded").observe((now - row.attempt_started_at).total_seconds())
    failpoint("after_complete_commit")
    return {by_run[s.run_id]: Completed(s.run_id, RunState.SUCCEEDED, s.stored.checksum) for _, s in common}


def _common(row: Row, success: Success) -> bool:
    """Whether this completion owns its run and publishes its own staged object with
    nothing else to do: no guard, no waiter, no next instant computed from completion."""
    stored = success.stored
    owned = stale_reason(run_state=row.run_state, current_attempt_id=row.current_attempt_id, run_fence=row.run_fence,
                         attempt_id=success.attempt_id, attempt_fence=row.attempt_fence,
                         attempt_state=row.attempt_state, fence=success.fence, leased=row.leased) is None
    return (
        owned
        and not row.holds_guard
        and not takes_guard(row.overlap_policy)
        and row.recurrence_kind != "after_completion"
        and row.object_state == ObjectState.STAGED
        and row.object_attempt_id == success.attempt_id
        and row.object_fence == success.fence
        and row.object_version_id is not None
        and row.object_version_id == stored.version_id
        and row.object_checksum == stored.checksum
    )
