"""Demand: the occurrences the schedules' rules make due in a range, computed from the
rules without materializing anything. Schedules that share a rule (the 09:00 wave of
thousands of schedules) are resolved once; jittered ones get their own due instants."""

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules import recurrence
from schedules.jitter import jittered
from schedules.models import Schedule

# Instants one distinct rule contributes at most to one range (a 7-day range of a minutely rule: 10,080).
MAX_INSTANTS_PER_RULE = 100_000
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Due:
    """`count` occurrences of one job type and tenant due at `at`."""

    at: datetime
    resource_class: str
    job_type: str
    tenant_id: str
    count: int


@dataclass(frozen=True)
class Source:
    """What of a schedule the demand depends on."""

    schedule_id: str
    tenant_id: str
    job_type: str
    resource_class: str
    rule: recurrence.Rule
    jitter_seconds: int = 0


def rule_instants(rule: recurrence.Rule, start: datetime, end: datetime) -> list[datetime]:
    """The rule's nominal instants in [start, end)."""
    found = recurrence.instants_between(rule, start - _TICK, end - _TICK, MAX_INSTANTS_PER_RULE)
    return [at for at in found if at < end]


def source_due(source: Source, start: datetime, end: datetime, instants=None) -> list[Due]:
    """One schedule's occurrences due in [start, end), each at its jittered instant. A jitter
    may push an occurrence of an instant just before `start` into the range: looked for too."""
    if instants is None:
        instants = rule_instants(source.rule, start - timedelta(seconds=source.jitter_seconds), end)
    due = Counter(jittered(source.schedule_id, at, source.jitter_seconds) for at in instants)
    return [Due(at, source.resource_class, source.job_type, source.tenant_id, n)
            for at, n in due.items() if start <= at < end]


def live_sources(*, exclude: str | None = None) -> list[tuple[Source, int]]:
    """(source, how many schedules share it) for every schedule that will run: not deleted,
    not paused, with a next instant. Schedules without jitter that share their rule, job
    type and tenant are one source."""
    rows = Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__isnull=False)
    if exclude:
        rows = rows.exclude(id=exclude)
    groups: dict[tuple, list] = defaultdict(list)
    for row in rows.values_list("id", "tenant_id", "job_type_id", "job_type__resource_class", "recurrence",
                                "created_at", "jitter_seconds").iterator(chunk_size=5000):
        schedule_id, tenant_id, job_type, rc, rule, created_at, jitter = row
        text = rule if isinstance(rule, str) else json.dumps(rule, sort_keys=True)
        unanchored = '"interval"' in text and '"anchor"' not in text  # anchored at its creation
        key = (schedule_id if jitter else None, tenant_id, job_type, rc, text, created_at if unanchored else None)
        groups[key].append((schedule_id, created_at, jitter))
    sources = []
    for (_, tenant_id, job_type, rc, text, _), members in groups.items():
        schedule_id, created_at, jitter = members[0]
        try:
            rule = recurrence.parse_rule(json.loads(text), default_anchor=created_at)
        except recurrence.RecurrenceError:
            continue  # stored under older, looser rules: the scanner cannot run it either
        sources.append((Source(schedule_id, tenant_id, job_type, rc, rule, jitter), len(members)))
    return sources


def occurrences_due(start: datetime, end: datetime, *, exclude: str | None = None,
                    extra: list[Source] = ()) -> list[Due]:
    """Every occurrence due in [start, end): the live schedules' (but `exclude`), and `extra`'s."""
    resolved: dict[tuple, list[datetime]] = {}
    due: list[Due] = []
    for source, count in [*live_sources(exclude=exclude), *((s, 1) for s in extra)]:
        if source.rule.kind == "after_completion":
            continue  # due when its previous run ends: no instant to forecast
        if source.jitter_seconds:
            due.extend(source_due(source, start, end))
            continue
        key = (json.dumps(source.rule.to_dict(), sort_keys=True),)
        if key not in resolved:
            resolved[key] = rule_instants(source.rule, start, end)
        due.extend(Due(at, source.resource_class, source.job_type, source.tenant_id, count)
                   for at in resolved[key])
    return due
