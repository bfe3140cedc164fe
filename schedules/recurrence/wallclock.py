"""Local wall-clock slots to instants: the one DST policy every calendar rule (cron, RRULE)
shares.

A local slot inside a DST gap resolves to the instant ``fold=0`` gives (shifted forward by
the gap); a repeated local time resolves to its first occurrence; slots resolving to the
same instant are one occurrence.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable
from zoneinfo import ZoneInfo

UTC = timezone.utc
# Look-back used to detect a DST gap that just happened; longer than any gap in tzdata
# (Pacific/Apia skipped a whole day in 2011).
GAP_LOOKBACK = timedelta(hours=25)


def resolve(slot: datetime, zone: ZoneInfo) -> datetime:
    """The instant (aware UTC) of the naive local ``slot`` under the policy above."""
    return slot.replace(tzinfo=zone).astimezone(UTC)


def next_resolved(first_slot_from: Callable[[datetime], datetime | None], zone: ZoneInfo, after: datetime,
                  *, resolution: timedelta) -> datetime | None:
    """Smallest resolution of a slot that is strictly after ``after``; ``first_slot_from(t)``
    is the rule's first naive local slot >= t (None: no more), slots lie on multiples of
    ``resolution`` (a minute for cron, a second for RRULE).

    Resolution is monotone for local times that exist, but a slot inside a DST gap
    resolves to the same instant as the slot one gap-length later, so it can beat
    earlier-resolving real slots. Hence: start scanning one gap-length before the local
    time of ``after`` when a gap just happened, keep the minimum, and stop at the first
    existing slot past ``after`` -- every later slot resolves later still.
    """
    local_after = after.astimezone(zone)
    offset = local_after.utcoffset()
    naive = local_after.replace(tzinfo=None)
    cursor = naive - (naive - datetime.min) % resolution
    gap = offset - (after - GAP_LOOKBACK).astimezone(zone).utcoffset()
    # Only a gap that ended less than its own length ago has slots resolving after `after`.
    if gap > timedelta(0) and (after - gap).astimezone(zone).utcoffset() != offset:
        cursor -= gap
    else:
        # A slot at the local time of `after` (floored) resolves to `after` or before it (to
        # the first occurrence when `after` is the second): start one slot later.
        cursor += resolution

    best: datetime | None = None
    while True:
        slot = first_slot_from(cursor)
        if slot is None:
            return best
        resolved = resolve(slot, zone)
        if resolved > after:
            if best is None or resolved < best:
                best = resolved
            if resolved.astimezone(zone).replace(tzinfo=None) == slot:
                return best
        cursor = slot + resolution
