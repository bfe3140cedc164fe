"""One completion entry point for a worker process: the outcomes of the attempts it finished,
each judged and recorded on its own, in as few transactions as their kinds allow.

The worker hands over outcomes only. Succeeded attempts with a staged object go to the
group commit (runs/authority/group_commit.py), its fast path, which itself passes what is not
the common case on to the single completion; every other outcome (failed, canceled) goes to
the single completion (runs/authority/completion.py). The caller never chooses the path.
"""

from typing import NamedTuple

from runs.authority.completion import complete
from runs.authority.group_commit import Completed, Success, complete_succeeded
from runs.models import StoredObject
from kernel.errors import DomainError


class Outcome(NamedTuple):
    """How one attempt ended, as its worker reports it."""
    run_id: str
    attempt_id: str
    fence: int
    outcome: str  # succeeded | failed | canceled
    stored: StoredObject | None = None  # a succeeded attempt's staged object (stage_results)
    error: str = ""
    retryable: bool = False
    reason: str = ""  # a failed outcome's AttemptReason ("timeout")


def complete_many(outcomes: list[Outcome]) -> list[Completed | Exception]:
    """Complete these attempts; per outcome, in order, what the authority recorded or the
    refusal (StaleFence, InvalidState, NotFound, ...) a single ``complete`` would have raised.
    A database error raises: what committed before it stands, and repeating the call is safe
    (a repeated completion is answered with the saved run)."""
    answers: dict[int, Completed | Exception] = {}
    grouped = [i for i, o in enumerate(outcomes) if o.outcome == "succeeded" and o.stored is not None]
    if grouped:
        successes = [Success(outcomes[i].run_id, outcomes[i].attempt_id, outcomes[i].fence, outcomes[i].stored)
                     for i in grouped]
        answers.update(zip(grouped, complete_succeeded(successes)))
    for i, outcome in enumerate(outcomes):
        if i not in answers:
            answers[i] = _complete_one(outcome)
    return [answers[i] for i in range(len(outcomes))]


def _complete_one(outcome: Outcome) -> Completed | Exception:
    stored = outcome.stored
    try:
        run = complete(
            run_id=outcome.run_id, attempt_id=outcome.attempt_id, fence=outcome.fence, outcome=outcome.outcome,
            object_key=stored.key if stored else None, version_id=stored.version_id if stored else None,
            checksum=stored.checksum if stored else None, error=outcome.error, retryable=outcome.retryable,
            reason=outcome.reason,
        )
    except DomainError as exc:
        return exc
    return Completed(run.id, run.state, run.result_checksum)
