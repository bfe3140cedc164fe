"""Statements on one run that need no lock: an attempt's progress and whether it still owns
its run, each guarded by the ownership rule (owner.owns_filter) on database time."""

from django.db.models import F

from runs.authority.owner import owns_filter
from runs.authority.statements.dialect import clock_expression
from runs.models import Run


def runs_set_progress_if_owned(*, run_id: str, attempt_id: str, fence: int, fraction: float, message: str) -> bool:
    """One guarded UPDATE: the run's progress ``fraction`` and ``message``, stamped with
    authority time, written only while the attempt owns the run; False when it does not
    (nothing written). No lock held or taken beyond the row's own for the write: progress
    is information, not state."""
    written = Run.objects.filter(owns_filter(attempt_id, fence), id=run_id).update(
        progress_fraction=fraction, progress_message=message, progress_at=clock_expression(),
        progress_attempt=F("attempt_count"))
    return written == 1


def runs_exist_if_owned(*, run_id: str, attempt_id: str, fence: int) -> bool:
    """Whether the attempt owns its run now: one read by primary key, no lock held or taken."""
    return Run.objects.filter(owns_filter(attempt_id, fence), id=run_id).exists()
