"""Shadow rollout of a recurrence engine (README, `RECURRENCE_ENGINE`): a candidate engine's
next instants compared with the active one's, before the candidate may decide anything.

A candidate is a function ``(rule, after) -> next instant strictly after, or None`` for the
rules it covers; ``NotImplemented`` means it has no opinion on this kind of rule (croniter
knows nothing of interval or once rules). Pure Python, like the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from schedules.recurrence.rules import Rule, next_after

UTC = timezone.utc


@dataclass(frozen=True)
class Mismatch:
    after: datetime  # both engines were asked for the next instant after this one
    active: datetime | None
    candidate: datetime | None


def croniter_next(rule: Rule, after: datetime):
    """croniter's next instant of a cron rule on its zone's wall clock, read in the rule's
    dialect (vixie: croniter's ``implement_cron_bug``; and: ``day_or=False``), seconds first
    for 6 fields and ``H`` hashed from the rule's key (croniter's own hash, not ours: an H
    rule shows as mismatches). Syntax croniter lacks (``L-n``, ``LW``, ...) has no opinion."""
    if rule.kind != "cron":
        return NotImplemented
    from croniter import croniter
    from croniter.croniter import CroniterError

    local = after.astimezone(ZoneInfo(rule.timezone))
    options = {"day_or": rule.dialect != "and", "implement_cron_bug": rule.dialect == "vixie",
               "second_at_beginning": len(rule.cron.split()) == 6, "hash_id": rule.hash_key}
    try:
        iterator = croniter(rule.cron, local, **options)
    except (CroniterError, ValueError, KeyError):
        return NotImplemented
    return iterator.get_next(datetime).astimezone(UTC)


BUILTIN_CANDIDATES = {"croniter": croniter_next}


def compare_next(rule: Rule, after: datetime, active: datetime | None, candidate) -> Mismatch | None:
    """The mismatch when the candidate's next instant after ``after`` is not ``active``."""
    theirs = candidate(rule, after)
    if theirs is NotImplemented or theirs == active:
        return None
    return Mismatch(after, active, theirs)


def compare_window(rule: Rule, start: datetime, days: float, candidate, *, limit: int = 100_000) -> list[Mismatch]:
    """Walk the active engine's instants from ``start`` over ``days``; at each, ask the
    candidate for the next one. Returns every disagreement (a candidate off by one instant
    is reported once there, then the walk goes on from the active engine's instant)."""
    end = start + timedelta(days=days)
    mismatches, after = [], start
    for _ in range(limit):
        active = next_after(rule, after)
        mismatch = compare_next(rule, after, active, candidate)
        if mismatch is not None:
            mismatches.append(mismatch)
        if active is None or active > end:
            return mismatches
        after = active
    return mismatches
