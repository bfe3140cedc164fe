"""Demand: the occurrences due in a range, computed from the schedules' rules without
materializing anything, plus the occurrences already materialized and due in it. One
definition for the capacity forecast (GET /api/v1/capacity/forecast, admission) and the
console's Next 24 hours.

A live schedule (not deleted, not paused: a paused one has no next instant) contributes
its rule's instants from its next instant (`next_run_at`, the first not yet materialized)
on, each due at its jittered instant; an after_completion schedule only its next instant
(the one after depends on when that run ends). What is already materialized is counted
from the runs instead: waiting for their due instant (a jittered or future manual run) or
queued with a due instant in the range, so no occurrence counts twice. Schedules without
jitter that share a rule (the 09:00 wave of thousands of schedules) are resolved once,
each joining the rule's instants at its own next instant.

With `durations` (runs.capacity.statistics.schedule_durations), an occurrence of a schedule
with enough history of its own carries its expected duration (`Due.duration`); the others
carry None: their job type's. Schedules sharing a rule share a source only with the same."""

import bisect
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q

from runs.models import PendingReason, Run, RunState
from schedules import recurrence
from schedules.jitter import jittered
from schedules.models import Schedule

# Instants one distinct rule contributes at most to one range (a 7-day range of a minutely rule: 10,080).
MAX_INSTANTS_PER_RULE = 100_000
_TICK = timedelta(microseconds=1)
# Materialized occurrences counted as due: waiting for their due instant, or already queued.
MATERIALIZED_DUE = Q(state=RunState.PENDING, pending_reason=PendingReason.NOT_DUE) | Q(state=RunState.QUEUED)


@dataclass(frozen=True)
class Due:
    """`count` occurrences of one job type and tenant due at `at`."""

    at: datetime
    resource_class: str
    job_type: str
    tenant_id: str
    count: int
    duration: float | None = None  # seconds a run is expected to take; None: its job type's


@dataclass(frozen=True)
class Source:
    """What of a schedule the demand depends on."""

    schedule_id: str
    tenant_id: str
    job_type: str
    resource_class: str
    rule: recurrence.Rule
    jitter_seconds: int = 0
    duration: float | None = None


def rule_instants(rule: recurrence.Rule, start: datetime, end: datetime) -> list[datetime]:
    """The rule's nominal instants in [start, end)."""
    found = recurrence.instants_between(rule, start - _TICK, end - _TICK, MAX_INSTANTS_PER_RULE)
    return [at for at in found if at < end]


def occurrence_instants(source: Source, start: datetime, end: datetime,
                        first: datetime | None = None) -> list[tuple[datetime, datetime]]:
    """(nominal instant, due instant) of one schedule's occurrences due in [start, end), each
    due at its jittered instant, from its next instant `first` on (None: every one). A jitter
    may push an occurrence of an instant just before `start` into the range: looked for too."""
    instants = _from_first(source.rule, start - timedelta(seconds=source.jitter_seconds), end, first)
    pairs = ((at, jittered(source.schedule_id, at, source.jitter_seconds)) for at in instants)
    return [(at, due) for at, due in pairs if start <= due < end]


def source_due(source: Source, start: datetime, end: datetime, first: datetime | None = None) -> list[Due]:
    """One schedule's occurrences due in [start, end) (occurrence_instants), counted per due instant."""
    due = Counter(at for _, at in occurrence_instants(source, start, end, first))
    return [Due(at, source.resource_class, source.job_type, source.tenant_id, n, source.duration)
            for at, n in due.items()]


def _from_first(rule: recurrence.Rule, start: datetime, end: datetime, first: datetime | None) -> list[datetime]:
    """The instants a schedule whose next instant is `first` has in [start, end): `first`
    itself (after_completion, or off the rule's grid) and the rule's from it on."""
    if rule.kind == "after_completion":
        return [first] if first is not None and start <= first < end else []
    instants = rule_instants(rule, start if first is None else max(start, first), end)
    if first is not None and start <= first < end and (not instants or instants[0] != first):
        instants.insert(0, first)
    return instants


def live_sources(*, exclude: str | None = None, before: datetime | None = None,
                 durations=None) -> list[tuple[Source, list[datetime]]]:
    """(source, the next instants of the schedules sharing it) for every schedule that will
    run: not deleted, not paused, with a next instant (before `before`, when given: a schedule
    whose next instant is later has nothing due earlier, jitter only adds to an instant).
    Schedules without jitter that share their rule, job type, tenant and expected duration
    are one source."""
    rows = Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__isnull=False)
    if before is not None:
        rows = rows.filter(next_run_at__lt=before)
    if exclude:
        rows = rows.exclude(id=exclude)
    rows = list(rows.values_list("id", "tenant_id", "job_type_id", "job_type__resource_class", "recurrence",
                                 "created_at", "jitter_seconds", "next_run_at").iterator(chunk_size=5000))
    own = durations([row[0] for row in rows]) if durations else {}
    groups: dict[tuple, list] = defaultdict(list)
    for schedule_id, tenant_id, job_type, rc, rule, created_at, jitter, next_run_at in rows:
        text = rule if isinstance(rule, str) else json.dumps(rule, sort_keys=True)
        unanchored = '"interval"' in text and '"anchor"' not in text  # anchored at its creation
        key = (schedule_id if jitter else None, tenant_id, job_type, rc, text, created_at if unanchored else None,
               own.get(schedule_id))
        groups[key].append((schedule_id, created_at, jitter, next_run_at))
    sources = []
    for (_, tenant_id, job_type, rc, text, _, duration), members in groups.items():
        schedule_id, created_at, jitter, _ = members[0]
        try:
            rule = recurrence.parse_rule(json.loads(text), default_anchor=created_at)
        except recurrence.RecurrenceError:
            continue  # stored under older, looser rules: the scanner cannot run it either
        source = Source(schedule_id, tenant_id, job_type, rc, rule, jitter, duration)
        sources.append((source, [m[3] for m in members]))
    return sources


def strict_schedules(resource_class: str, *, exclude: str | None, before: datetime) -> list[tuple[Source, datetime, int]]:
    """(source, next instant, startDeadlineSeconds) of every live strict schedule of the
    class with a rule of its own instants (not after_completion) and a next instant before
    `before`, but `exclude`: the promises an admission must not break."""
    rows = (Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__lt=before,
                                    start_deadline_seconds__gte=1, job_type__resource_class=resource_class)
            .exclude(id=exclude or "").order_by("next_run_at", "id")
            .values_list("id", "tenant_id", "job_type_id", "recurrence", "created_at", "jitter_seconds", "next_run_at",
                         "start_deadline_seconds"))
    found = []
    for schedule_id, tenant_id, job_type, rule, created_at, jitter, next_run_at, deadline in rows:
        try:
            rule = recurrence.parse_rule(rule, default_anchor=created_at)
        except recurrence.RecurrenceError:
            continue  # stored under older, looser rules: the scanner cannot run it either
        if rule.kind != "after_completion":
            found.append((Source(schedule_id, tenant_id, job_type, resource_class, rule, jitter), next_run_at, deadline))
    return found


def occurrences_due(start: datetime, end: datetime, *, exclude: str | None = None,
                    extra: list[Source] = (), durations=None) -> list[Due]:
    """Every occurrence due in [start, end): the live schedules' (but `exclude`) from their
    next instants, `extra`'s from `start`, and the materialized ones (`materialized_due`)."""
    resolved: dict[str, list[datetime]] = {}
    due: list[Due] = materialized_due(start, end, durations=durations)
    live = live_sources(exclude=exclude, before=end, durations=durations)
    for source, firsts in [*live, *((s, [None]) for s in extra)]:
        if source.jitter_seconds or source.rule.kind == "after_completion":
            for first in firsts:
                due.extend(source_due(source, start, end, first=first))
            continue
        key = json.dumps(source.rule.to_dict(), sort_keys=True)
        if key not in resolved:
            resolved[key] = rule_instants(source.rule, start, end)
        due.extend(_shared_due(source, resolved[key], firsts, start, end))
    return due


def _shared_due(source: Source, instants: list[datetime], firsts: list, start: datetime,
                end: datetime) -> list[Due]:
    """The occurrences of schedules sharing `source` (no jitter) and its `instants` in the
    range: each schedule joins them at its next instant (None: at the first), and counts
    that instant by itself when it is off the rule's grid."""
    joining = [0] * (len(instants) + 1)  # schedules whose instants begin at index i
    off_grid: Counter = Counter()
    for first in firsts:
        index = 0 if first is None else bisect.bisect_left(instants, first)
        if first is not None and start <= first < end and (index == len(instants) or instants[index] != first):
            off_grid[first] += 1
        joining[index] += 1
    due = [Due(at, source.resource_class, source.job_type, source.tenant_id, n, source.duration)
           for at, n in off_grid.items()]
    active = 0
    for index, at in enumerate(instants):
        active += joining[index]
        if active:
            due.append(Due(at, source.resource_class, source.job_type, source.tenant_id, active, source.duration))
    return due


def materialized_due(start: datetime, end: datetime, *, durations=None) -> list[Due]:
    """Occurrences already materialized and due in [start, end): waiting for their due
    instant (jittered, or a manual run for later) or queued. The rules' walk starts after
    them (at each schedule's next instant), so none counts twice."""
    fields = ("due_at", "resource_class", "job_type", "tenant_id", *(("schedule_id",) if durations else ()))
    rows = list(Run.objects.filter(MATERIALIZED_DUE, due_at__gte=start, due_at__lt=end)
                .values_list(*fields).annotate(n=Count("id")).order_by())
    if not durations:
        return [Due(at, rc, job_type, tenant_id, n) for at, rc, job_type, tenant_id, n in rows]
    own = durations({row[4] for row in rows})
    due: Counter = Counter()
    for at, rc, job_type, tenant_id, schedule_id, n in rows:
        due[(at, rc, job_type, tenant_id, own.get(schedule_id))] += n
    return [Due(at, rc, job_type, tenant_id, n, duration) for (at, rc, job_type, tenant_id, duration), n in due.items()]
