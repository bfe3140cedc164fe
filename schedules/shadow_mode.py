"""Shadow mode of a recurrence engine at materialization: with
RECURRENCE_ENGINE=shadow:<candidate> the builtin engine stays authoritative and, for every
schedule a wave materializes, the candidate is asked for the next instant after the last
one written; a disagreement is recorded (ShadowDisagreement, the admin's list) and counted.

Candidates: schedules.recurrence.shadow_candidates.BUILTIN_CANDIDATES, and RECURRENCE_CANDIDATES
(name -> dotted path of a ``(rule, after) -> instant`` function) for others.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from schedules.models import ShadowDisagreement
from schedules.recurrence import Rule
from schedules.recurrence.shadow_candidates import BUILTIN_CANDIDATES, compare_next


def candidate_named(name: str):
    if name in BUILTIN_CANDIDATES:
        return BUILTIN_CANDIDATES[name]
    path = getattr(settings, "RECURRENCE_CANDIDATES", {}).get(name)
    if path is None:
        raise ImproperlyConfigured(f"no recurrence candidate named {name!r}")
    return import_string(path)


class ShadowWave:
    """The disagreements of one materialization wave, recorded in its transaction."""

    def __init__(self, name: str):
        self.name = name
        self.candidate = candidate_named(name)
        self.rows: list[ShadowDisagreement] = []
        self.seen: dict[tuple, object] = {}  # (rule, after) -> mismatch or None: a wave shares rules

    @classmethod
    def active(cls) -> ShadowWave | None:
        engine = settings.RECURRENCE_ENGINE
        if engine == "builtin":
            return None
        kind, _, name = engine.partition(":")
        if kind != "shadow" or not name:
            raise ImproperlyConfigured(f"RECURRENCE_ENGINE must be 'builtin' or 'shadow:<candidate>', not {engine!r}")
        return cls(name)

    def observe(self, schedule, rule: Rule, plan) -> None:
        """Compare the candidate's next instant after the plan's last one with the plan's."""
        written = list(plan.run) + list(plan.skipped)
        if plan.skipped_range:
            written.append(plan.skipped_range.last)
        if not written or plan.ended_by_count:
            return  # no next instant to compare: the schedule's endAfterOccurrences, not its rule, ended it
        after = max(written)
        key = (rule, after)
        if key not in self.seen:
            self.seen[key] = compare_next(rule, after, plan.next_run_at, self.candidate)
        mismatch = self.seen[key]
        if mismatch is not None:
            self.rows.append(ShadowDisagreement(
                schedule_id=schedule.id, candidate=self.name, recurrence=rule.to_dict(), after=mismatch.after,
                active_next=mismatch.active, candidate_next=mismatch.candidate,
            ))

    def record(self) -> int:
        """Write the disagreements found (each (schedule, candidate, after) once); how many."""
        ShadowDisagreement.objects.bulk_create(self.rows, ignore_conflicts=True)
        return len(self.rows)
