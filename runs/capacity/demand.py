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
carry None: their job type's. Schedules sharing a rule share a source only with the same.
Each occurrence says whether it is strict (its schedule has startDeadlineSeconds), as the run
will: the claim serves strict runs first.

A jittered schedule draws each occurrence's offset (schedules.jitter), so each is walked by
itself; but one whose instants are no farther apart than its jitter (a "dense" one: every
second with a minute of jitter) has as many occurrences due in any period as its rule, the
draws only spreading them across it: it is forecast as its rule's instants each shifted by
half its jitter (`Source.shift_seconds`), and alike dense schedules share a source as
schedules without jitter do. Forty of them due every second would otherwise be 3.5 million
draws a day, more than any forecast or admission may do.

Each schedule's rule is read as the scanner reads it: in its window (activeFrom, activeUntil),
no further than the instants its endAfterOccurrences leaves, and under its calendars (an
excluded day's instant skipped or moved), each tenant's calendars read once per forecast
(`StoredRules`).

The cost is bounded by the rules, not by the schedules: interval rules with the same period
and phase are one rule (a thousand every-second schedules walk one), an interval rule is
walked by arithmetic, and a `budget` caps the instants walked in all (DemandTooLarge)."""

import bisect
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from django.db.models import Aggregate, BooleanField, Case, Count, DateTimeField, F, Q, TextField, Value, When
from django.db.models.functions import Cast

from runs.models import PendingReason, Run, RunState
from schedules import recurrence
from schedules.calendars import calendar_days_for, schedule_calendar_rule
from schedules.jitter import MAX_JITTER_SECONDS, jittered
from schedules.models import Schedule

_TICK = timedelta(microseconds=1)
_PHASE_ORIGIN = datetime(2000, 1, 1, tzinfo=timezone.utc)  # interval rules are compared by their phase from it
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
    strict: bool = False  # of a schedule with startDeadlineSeconds: the claim serves it first


@dataclass(frozen=True)
class Source:
    """What of a schedule the demand depends on."""

    schedule_id: str
    tenant_id: str
    job_type: str
    resource_class: str
    rule: recurrence.Rule
    jitter_seconds: int = 0  # drawn per occurrence
    duration: float | None = None
    strict: bool = False
    shift_seconds: int = 0  # a dense jittered schedule's: every occurrence due this long after its instant


class DemandTooLarge(Exception):
    """The rules due in the range have more instants than the budget (`limit`) allows: at
    least `walked`."""

    def __init__(self, walked: int, limit: int):
        super().__init__(f"more than {limit} instants to walk")
        self.walked, self.limit = walked, limit


class Budget:
    """Instants a demand computation may still walk (None: no limit)."""

    def __init__(self, limit: int | None):
        self.limit, self.walked = limit, 0

    def room(self) -> int | None:
        return None if self.limit is None else self.limit - self.walked

    def take(self, n: int) -> None:
        self.walked += n
        if self.limit is not None and self.walked > self.limit:
            raise DemandTooLarge(self.walked, self.limit)


UNLIMITED = Budget(None)


class StoredRules:
    """Schedules' stored rules as the scanner reads them: in their window, under their
    calendars. Each stored text is parsed once; each set of a tenant's calendars is read once."""

    def __init__(self):
        self.parsed: dict[tuple, recurrence.Rule | None] = {}
        self.calendars: dict[tuple, dict] = {}
        self.ends: dict[tuple, datetime | None] = {}  # the last instant a count leaves, when it matters

    def rule(self, tenant_id: str, text: str, anchor: datetime | None, calendar: str | None,
             active_from: datetime | None, active_until: datetime | None) -> recurrence.Rule | None:
        """None: a rule stored under older, looser rules (the scanner cannot run it either)."""
        key = (tenant_id, text, anchor, calendar, active_from, active_until)
        if key not in self.parsed:
            self.parsed[key] = self._read(tenant_id, text, anchor, calendar, active_from, active_until)
        return self.parsed[key]

    def _read(self, tenant_id, text, anchor, calendar, active_from, active_until) -> recurrence.Rule | None:
        try:
            rule = recurrence.parse_rule(json.loads(text) if isinstance(text, str) else text, default_anchor=anchor)
        except recurrence.RecurrenceError:
            return None
        if isinstance(calendar, str):
            calendar = json.loads(calendar)
        rule = schedule_calendar_rule(rule, calendar).within(active_from, active_until)
        refs = rule.calendar_refs()
        if not refs:
            return rule
        if (tenant_id, refs) not in self.calendars:
            self.calendars[tenant_id, refs] = calendar_days_for(refs, tenant_id=tenant_id)
        return rule.bound(self.calendars[tenant_id, refs])

    def counted(self, rule: recurrence.Rule, first: datetime, left: int | None, before: datetime | None,
                budget: Budget = UNLIMITED) -> recurrence.Rule:
        """`rule` of a schedule whose next instant is `first` and that may still materialize
        `left` instants (its endAfterOccurrences; None: no end by count): ending at the last
        of them when that comes before `before` (only instants before it are asked for)."""
        if left is None or rule.kind == "after_completion":
            return rule
        left = max(0, left)
        key = (rule_identity(rule), first, left, before)
        if key not in self.ends:
            if left == 0:
                self.ends[key] = first - _TICK
            else:
                end = recurrence.LATEST if before is None else before
                instants = rule_instants(rule, first, end, budget, most=left)
                if not instants or instants[0] != first:  # a next instant off the rule's grid counts too
                    instants = [first, *instants][:left]
                self.ends[key] = instants[-1] if len(instants) == left else None
        last = self.ends[key]
        return rule if last is None else rule.within(rule.active_from, last)


def proposed_rule(schedule, rule: recurrence.Rule) -> recurrence.Rule:
    """`rule` as `schedule` (not stored yet, or as an edit would store it) would have the
    scanner read it: in its window, under its calendars (the tenant's, read now; one not
    found is left out, the write answers 404 for it), as StoredRules reads a stored rule."""
    rule = schedule_calendar_rule(rule, schedule.calendar).within(schedule.active_from, schedule.active_until)
    refs = rule.calendar_refs()
    return rule.bound(calendar_days_for(refs, tenant_id=schedule.tenant_id)) if refs else rule


def rule_identity(rule: recurrence.Rule) -> str:
    """Equal for rules with the same instants: the recurrence, its window and its calendars."""
    window = [at.isoformat() if at else None for at in (rule.active_from, rule.active_until)]
    return json.dumps([rule.to_dict(), window, sorted(rule.calendar_refs()), rule.calendar_policy], sort_keys=True)


def rule_instants(rule: recurrence.Rule, start: datetime, end: datetime, budget: Budget = UNLIMITED,
                  most: int | None = None) -> list[datetime]:
    """The rule's nominal instants in [start, end) (the first `most` of them)."""
    end = min(end, recurrence.LATEST + _TICK)
    if rule.kind == "interval" and rule.active_until is not None:
        end = min(end, rule.active_until + _TICK)
    if rule.kind == "interval" and not rule.calendar_refs():
        # By arithmetic: an every-second rule over a day is 86,400 instants.
        first = recurrence.first_not_before(rule, start)
        if first is None or first >= end:
            return []
        step = timedelta(seconds=rule.every_seconds)
        count = -((first - end) // step)
        count = count if most is None else min(count, most)
        budget.take(count)
        return [first + k * step for k in range(count)]
    room = budget.room()
    limit = min(10**9 if room is None else room + 1, 10**9 if most is None else most)
    found = recurrence.instants_between(rule, start - _TICK, end - _TICK, limit)
    budget.take(len(found))
    return [at for at in found if at < end]


def same_instants(rule: recurrence.Rule) -> recurrence.Rule:
    """A rule with the same instants from any of its own on: an interval rule anchored at its
    phase (the first instant from _PHASE_ORIGIN on), so alike intervals are walked once."""
    if rule.kind != "interval" or rule.anchor is None:
        return rule
    step = timedelta(seconds=rule.every_seconds)
    return replace(rule, anchor=_PHASE_ORIGIN + (rule.anchor - _PHASE_ORIGIN) % step)


def occurrence_instants(source: Source, start: datetime, end: datetime, first: datetime | None = None,
                        walked: list[datetime] | None = None, budget: Budget = UNLIMITED,
                        most: int | None = None) -> list[tuple[datetime, datetime]]:
    """(nominal instant, due instant) of one schedule's occurrences due in [start, end), each
    due at its jittered instant, from its next instant `first` on (None: every one). A jitter
    may push an occurrence of an instant just before `start` into the range: looked for too.
    `walked`, given, holds the rule's instants from MAX_JITTER_SECONDS before `start` to `end`
    (walked once for every schedule of the rule). With `most`, only the first `most` nominal
    instants are drawn."""
    instants = _from_first(source.rule, start - timedelta(seconds=source.jitter_seconds), end, first, walked, budget,
                           most)
    if most is not None:
        instants = instants[:most]
    if walked is not None:  # each jittered schedule draws each of its instants: they count too
        budget.take(len(instants))
    pairs = ((at, jittered(source.schedule_id, at, source.jitter_seconds)) for at in instants)
    return [(at, due) for at, due in pairs if start <= due < end]


def source_due(source: Source, start: datetime, end: datetime, first: datetime | None = None,
               walked: list[datetime] | None = None, budget: Budget = UNLIMITED) -> list[Due]:
    """One schedule's occurrences due in [start, end) (occurrence_instants), counted per due instant."""
    due = Counter(at for _, at in occurrence_instants(source, start, end, first, walked, budget))
    return [Due(at, source.resource_class, source.job_type, source.tenant_id, n, source.duration, source.strict)
            for at, n in due.items()]


def _from_first(rule: recurrence.Rule, start: datetime, end: datetime, first: datetime | None,
                walked: list[datetime] | None = None, budget: Budget = UNLIMITED,
                most: int | None = None) -> list[datetime]:
    """The instants a schedule whose next instant is `first` has in [start, end): `first`
    itself (after_completion, or off the rule's grid) and the rule's from it on (read from
    `walked`, the rule's instants from before `start` to `end`, when given)."""
    if rule.kind == "after_completion":
        return [first] if first is not None and start <= first < end else []
    lowest = start if first is None else max(start, first)
    if walked is None:
        instants = rule_instants(rule, lowest, end, budget, most)
    else:
        instants = walked[bisect.bisect_left(walked, lowest):]
    if first is not None and start <= first < end and (not instants or instants[0] != first):
        instants.insert(0, first)
    return instants


def live_sources(*, exclude: str | None = None, before: datetime | None = None,
                 durations=None, resource_class: str | None = None,
                 budget: Budget = UNLIMITED) -> list[tuple[Source, list[datetime]]]:
    """(source, the next instants of the schedules sharing it) for every schedule that will
    run: not deleted, not paused, with a next instant (before `before`, when given: a schedule
    whose next instant is later has nothing due earlier, jitter only adds to an instant).
    Schedules without jitter (or densely jittered alike: same jitter) that share their instants
    (same_instants), job type, tenant, strictness and expected duration are one source."""
    live = _live(exclude, before, resource_class)
    rows = _live_rows(live)
    own = durations(live.values("id")) if durations else {}
    stored, spacing = StoredRules(), {}
    groups: dict[tuple, list] = defaultdict(list)
    for ids, tenant_id, job_type, rc, text, anchor, calendar, active_from, active_until, left, jitter, next_run_at, \
            strict in rows:
        rule = stored.rule(tenant_id, text, anchor, calendar, active_from, active_until)
        if rule is None:
            continue
        rule = same_instants(stored.counted(rule, next_run_at, left, before, budget))
        rule_key = rule_identity(rule)
        shift = 0
        if jitter:
            if rule_key not in spacing:
                spacing[rule_key] = _spacing(rule, next_run_at)
            if spacing[rule_key] is not None and spacing[rule_key] <= jitter:
                jitter, shift = 0, jitter // 2  # dense: its rule's instants, shifted
        for schedule_id in ids:
            key = (schedule_id if jitter else None, tenant_id, job_type, rc, rule_key, own.get(schedule_id),
                   bool(strict), shift)
            groups[key].append((schedule_id, jitter, next_run_at, rule))
    sources = []
    for (_, tenant_id, job_type, rc, _, duration, strict, shift), members in groups.items():
        schedule_id, jitter, _, rule = members[0]
        sources.append((Source(schedule_id, tenant_id, job_type, rc, rule, jitter, duration, strict, shift),
                        [m[2] for m in members]))
    return sources


def _spacing(rule: recurrence.Rule, first: datetime) -> float | None:
    """Seconds between the closest two of the rule's next instants from `first` (None: it has
    fewer than two): how far apart a jitter must spread them to overlap."""
    if rule.kind == "interval":
        return rule.every_seconds
    if rule.kind == "after_completion":
        return None
    found = recurrence.instants_between(rule, first - _TICK, recurrence.LATEST, 4)
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(found, found[1:])]
    return min(gaps, default=None)


class _Joined(Aggregate):
    """The group's values joined by commas (ids hold none): a wave of thousands of schedules
    with one rule and one next instant is one row, not thousands."""

    function = "STRING_AGG"
    template = "%(function)s(%(expressions)s, ',')"
    output_field = TextField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="GROUP_CONCAT", **extra_context)


def _live(exclude: str | None, before: datetime | None, resource_class: str | None = None):
    rows = Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__isnull=False)
    if before is not None:
        rows = rows.filter(next_run_at__lt=before)
    if resource_class is not None:
        rows = rows.filter(job_type__resource_class=resource_class)
    return rows.exclude(id=exclude) if exclude else rows


_RULE_COLUMNS = ("rule", "anchor", "calendar_text", "active_from", "active_until", "left")


def _live_rows(rows) -> list[tuple]:
    """(ids, tenant, job type, class, rule as JSON text, anchor, calendar as JSON text,
    activeFrom, activeUntil, instants its endAfterOccurrences leaves (null: no end by count),
    jitter, next instant, strict) of the schedules of `rows`, grouped.
    The anchor is the creation time of an interval rule without an anchor of its own (it is
    anchored there), else null."""
    unanchored = Q(recurrence__kind="interval") & ~Q(recurrence__has_key="anchor")
    rows = rows.annotate(
        rule=Cast("recurrence", TextField()),
        anchor=Case(When(unanchored, then=F("created_at")), default=Value(None), output_field=DateTimeField()),
        calendar_text=Cast("calendar", TextField()),
        left=F("end_after_occurrences") - F("occurrences_materialized"),
        strict=Case(When(start_deadline_seconds__isnull=False, then=Value(True)), default=Value(False),
                    output_field=BooleanField()),
    ).values("tenant_id", "job_type_id", "job_type__resource_class", *_RULE_COLUMNS, "jitter_seconds", "next_run_at",
             "strict")
    # A stable order: the same forecast each time.
    rows = rows.annotate(ids=_Joined("id")).order_by("next_run_at", "tenant_id", "job_type_id", *_RULE_COLUMNS,
                                                     "jitter_seconds", "strict")
    return [(ids.split(","), *rest) for ids, *rest in rows.values_list(
        "ids", "tenant_id", "job_type_id", "job_type__resource_class", *_RULE_COLUMNS, "jitter_seconds",
        "next_run_at", "strict")]


def strict_schedules(resource_class: str, *, exclude: str | None, before: datetime) -> list[tuple[Source, datetime, int]]:
    """(source, next instant, startDeadlineSeconds) of every live strict schedule of the
    class with a rule of its own instants (not after_completion) and a next instant before
    `before`, but `exclude`: the promises an admission must not break."""
    rows = (Schedule.objects.filter(deleted_at__isnull=True, paused=False, next_run_at__lt=before,
                                    start_deadline_seconds__gte=1, job_type__resource_class=resource_class)
            .exclude(id=exclude or "").order_by("next_run_at", "id")
            .values_list("id", "tenant_id", "job_type_id", "recurrence", "created_at", "calendar", "active_from",
                         "active_until", "end_after_occurrences", "occurrences_materialized", "jitter_seconds",
                         "next_run_at", "start_deadline_seconds"))
    found, stored = [], StoredRules()
    for (schedule_id, tenant_id, job_type, text, created_at, calendar, active_from, active_until, end_after, materialized,
         jitter, next_run_at, deadline) in rows:
        rule = stored.rule(tenant_id, json.dumps(text, sort_keys=True), created_at, json.dumps(calendar, sort_keys=True),
                           active_from, active_until)
        if rule is not None and rule.kind != "after_completion":
            left = None if end_after is None else max(0, end_after - materialized)
            rule = stored.counted(rule, next_run_at, left, before)
            found.append((Source(schedule_id, tenant_id, job_type, resource_class, rule, jitter, strict=True),
                          next_run_at, deadline))
    return found


def occurrences_due(start: datetime, end: datetime, *, exclude: str | None = None,
                    extra: list[Source] = (), durations=None, budget: Budget = UNLIMITED,
                    resource_class: str | None = None) -> list[Due]:
    """Every occurrence due in [start, end) (of `resource_class`'s job types only, when
    given): the live schedules' (but `exclude`) from their next instants, `extra`'s from
    `start`, and the materialized ones (`materialized_due`). Each instant walked and each
    occurrence counted is taken from `budget` (DemandTooLarge when it runs out)."""
    walk = budget
    resolved: dict[tuple, list[datetime]] = {}  # each rule walked once (twice with jitter: from earlier)
    due: list[Due] = materialized_due(start, end, durations=durations, resource_class=resource_class)
    live = live_sources(exclude=exclude, before=end, durations=durations, resource_class=resource_class, budget=walk)
    for source, firsts in [*live, *((s, [None]) for s in extra)]:
        if source.rule.kind == "after_completion":
            due.extend(d for first in firsts for d in source_due(source, start, end, first=first, budget=walk))
            continue
        jitter = bool(source.jitter_seconds)
        shift = timedelta(seconds=source.shift_seconds)
        key = (rule_identity(source.rule), jitter, shift)
        if key not in resolved:
            earliest = start - timedelta(seconds=MAX_JITTER_SECONDS * jitter) - shift
            resolved[key] = rule_instants(source.rule, earliest, end - shift, walk)
        if jitter:
            due.extend(d for first in firsts for d in source_due(source, start, end, first, resolved[key], walk))
        else:
            walk.take(len(resolved[key]))
            due.extend(_shared_due(source, resolved[key], firsts, start - shift, end - shift, shift))
    return due


def _shared_due(source: Source, instants: list[datetime], firsts: list, start: datetime,
                end: datetime, shift: timedelta = timedelta(0)) -> list[Due]:
    """The occurrences of schedules sharing `source` (no jitter, or dense jitter: due `shift`
    after each instant) and its `instants` in the range of instants [start, end): each
    schedule joins them at its next instant (None: at the first), and counts that instant by
    itself when it is off the rule's grid."""
    joining = [0] * (len(instants) + 1)  # schedules whose instants begin at index i
    off_grid: Counter = Counter()
    for first in firsts:
        index = 0 if first is None else bisect.bisect_left(instants, first)
        if first is not None and start <= first < end and (index == len(instants) or instants[index] != first):
            off_grid[first] += 1
        joining[index] += 1
    rc, job_type, tenant, duration, strict = (source.resource_class, source.job_type, source.tenant_id,
                                              source.duration, source.strict)
    due = [Due(at + shift, rc, job_type, tenant, n, duration, strict) for at, n in off_grid.items()]
    active = 0
    for index, at in enumerate(instants):
        active += joining[index]
        if active:
            due.append(Due(at + shift, rc, job_type, tenant, active, duration, strict))
    return due


def materialized_due(start: datetime, end: datetime, *, durations=None, resource_class: str | None = None) -> list[Due]:
    """Occurrences already materialized and due in [start, end): waiting for their due
    instant (jittered, or a manual run for later) or queued. The rules' walk starts after
    them (at each schedule's next instant), so none counts twice."""
    fields = ("due_at", "resource_class", "job_type", "tenant_id", "strict", *(("schedule_id",) if durations else ()))
    runs = Run.objects.filter(MATERIALIZED_DUE, due_at__gte=start, due_at__lt=end)
    if resource_class is not None:
        runs = runs.filter(resource_class=resource_class)
    rows = list(runs.values_list(*fields).annotate(n=Count("id")).order_by())
    if not durations:
        return [Due(at, rc, job_type, tenant_id, n, None, strict) for at, rc, job_type, tenant_id, strict, n in rows]
    own = durations({row[5] for row in rows})
    due: Counter = Counter()
    for at, rc, job_type, tenant_id, strict, schedule_id, n in rows:
        due[(at, rc, job_type, tenant_id, own.get(schedule_id), strict)] += n
    return [Due(at, rc, job_type, tenant_id, n, duration, strict)
            for (at, rc, job_type, tenant_id, duration, strict), n in due.items()]
