"""User-approved jitter: a schedule with ``jitterSeconds`` spreads its occurrences over
``[instant, instant + jitterSeconds]``. The offset is a hash of the schedule and the
nominal instant, so an occurrence always gets the same one: materializing it again, a
forecast or a preview agree, and a retry never moves it."""

import hashlib
from datetime import datetime, timedelta, timezone

from schedules import recurrence

MAX_JITTER_SECONDS = 3600  # the largest jitterSeconds a schedule may have


def jitter_offset(schedule_id: str, instant: datetime, jitter_seconds: int) -> int:
    """Whole seconds in [0, jitter_seconds] for this schedule's occurrence at `instant`."""
    if not jitter_seconds:
        return 0
    nominal = instant.astimezone(timezone.utc).isoformat()
    digest = hashlib.sha256(f"{schedule_id}|{nominal}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (jitter_seconds + 1)


def jittered(schedule_id: str, instant: datetime, jitter_seconds: int) -> datetime:
    """The occurrence's due instant: its nominal instant plus its offset, but never past the
    last instant every zone's wall clock can show (the preview, the forecast and the stored
    run all stay renderable)."""
    return min(instant + timedelta(seconds=jitter_offset(schedule_id, instant, jitter_seconds)), recurrence.LATEST)
