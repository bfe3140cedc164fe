"""The overlap policy as one pure function (after Temporal's ``processBuffer``).

A schedule whose policy is not ``allow`` lets one occurrence at a time hold its active-run
guard. Every decision about an occurrence and that guard goes through ``admit``: when the
scanner materializes a new instant, when a worker claims a queued occurrence, and when the
guard holder finishes and the oldest waiter is considered again.
"""

from enum import Enum

from schedules.models import OverlapPolicy


class Step(str, Enum):
    START = "start"  # claimable now; under a guarded policy it takes the guard at claim
    WAIT = "wait"  # pending, reason overlap: released when the guard holder finishes
    SKIP = "skip"  # skipped, reason overlap: never runs


def admit(policy: str, *, guard: str | None, run_id: str | None = None, waiting: int = 0, new: bool) -> Step:
    """What happens to one occurrence of a schedule.

    ``guard`` is the id of the occurrence holding the schedule's guard (None: free),
    ``waiting`` how many admitted occurrences not holding it are ahead of this one, and
    ``new`` whether the occurrence is being materialized now (a new instant may be skipped)
    or was admitted earlier (queued or waiting: it only ever waits for the guard).
    """
    if policy == OverlapPolicy.ALLOW or (guard is not None and guard == run_id):
        return Step.START
    if not new:
        return Step.START if guard is None else Step.WAIT
    if guard is None and not waiting:
        return Step.START
    if waiting or policy == OverlapPolicy.SKIP:
        return Step.SKIP
    return Step.WAIT  # buffer_one: the one slot in the buffer


def takes_guard(policy: str) -> bool:
    """Whether a started occurrence of this policy holds the schedule's guard while active."""
    return policy != OverlapPolicy.ALLOW
