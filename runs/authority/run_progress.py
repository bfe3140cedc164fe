"""A running job's progress: one guarded UPDATE, written only while the attempt owns the run.

Progress is information, not state: it never changes a run's state, fence, lease or
result, so it takes no lock and no transaction of its own. The guard is the ownership rule
(runs.authority.owner) on database time, in statements.runs.runs_set_progress_if_owned: a
stale attempt's progress matches no row and is dropped.
"""

from runs.authority.statements.runs import runs_set_progress_if_owned

MAX_PROGRESS_MESSAGE = 500


def record_progress(*, run_id: str, attempt_id: str, fence: int, fraction: float, message: str = "") -> bool:
    """Store ``fraction`` (0 to 1) and ``message`` as the run's progress, stamped with
    authority time; False when the attempt no longer owns the run (nothing written)."""
    fraction, message = checked_progress(fraction, message)
    return runs_set_progress_if_owned(run_id=run_id, attempt_id=attempt_id, fence=fence, fraction=fraction,
                                      message=message)


def checked_progress(fraction, message) -> tuple[float, str]:
    """``(fraction, message)`` as stored: ValueError unless the fraction is a number from 0 to
    1; the message as text, cut to 500 characters."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"progress fraction must be a number from 0 to 1, got {fraction!r}")
    return float(fraction), str(message)[:MAX_PROGRESS_MESSAGE]
