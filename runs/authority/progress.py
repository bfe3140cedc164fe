"""A running job's progress: one guarded UPDATE, written only while the attempt owns the run.

Progress is information, not state: it never changes a run's state, fence, lease or
result, so it takes no lock and no transaction of its own. The guard is the ownership rule
(runs.authority.owner) on database time; a stale attempt's progress matches no row and is
dropped.
"""

from django.db import connection
from django.db.models import DateTimeField, F, Func
from django.utils import timezone

from runs.authority.owner import owns_filter
from runs.models import Run

MAX_PROGRESS_MESSAGE = 500


def record_progress(*, run_id: str, attempt_id: str, fence: int, fraction: float, message: str = "") -> bool:
    """Store ``fraction`` (0 to 1) and ``message`` as the run's progress, stamped with
    authority time; False when the attempt no longer owns the run (nothing written)."""
    fraction, message = checked_progress(fraction, message)
    now = statement_now()
    written = Run.objects.filter(owns_filter(attempt_id, fence), id=run_id).update(
        progress_fraction=fraction, progress_message=message, progress_at=now, progress_attempt=F("attempt_count"))
    return written == 1


def checked_progress(fraction, message) -> tuple[float, str]:
    """``(fraction, message)`` as stored: ValueError unless the fraction is a number from 0 to
    1; the message as text, cut to 500 characters."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"progress fraction must be a number from 0 to 1, got {fraction!r}")
    return float(fraction), str(message)[:MAX_PROGRESS_MESSAGE]


def statement_now():
    """Authority time inside the statement itself (no extra round trip on PostgreSQL)."""
    if connection.vendor == "postgresql":
        return Func(function="clock_timestamp", output_field=DateTimeField())
    return timezone.now()  # the embedded SQLite lives on this host: its clock is the process clock
