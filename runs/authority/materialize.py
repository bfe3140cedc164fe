"""Materialization: due instants become occurrences, in the transaction that advances the rule."""

import json
import random
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from schedules.jitter import jittered
from schedules.selectors import occurrences_left
from schedules.models import DirectiveAction, JobType, Schedule
from schedules.shadow_mode import ShadowWave
from runs.authority.catch_up_bounds import WALK_UNDER_LOCK, Planned, WavePlans, plan_within_budget
from runs.authority.finish_and_dispatch import dispatch_row
from runs.catch_up import CatchUpPlan
from runs import metrics
from runs.authority.statements.outbox import outbox_notify
from runs.authority.statements.rows import bulk_set
from runs.authority.statements.schedules import schedules_lock_due, schedules_lock_due_among, schedules_lock_live
from runs.authority.statements.wave import bulk_insert, directives_read_live_at, revisions_read_payloads
from kernel.clock import authority_now
from runs.counts import Counts
from runs.overlap import Step, admit, takes_guard
from runs.models import UNFINISHED, Outbox, PendingReason, Run, RunState, SkipReason, Trigger, new_run_id
from kernel.failpoints import failpoint


@dataclass
class MaterializeStats(Counts):
    schedules: int = 0
    queued: int = 0
    pending: int = 0
    skipped: int = 0


# What materialization reads of a schedule; params and effects come from the revision row.
MATERIALIZE_FIELDS = (
    "id", "tenant_id", "job_type_id", "recurrence", "revision", "misfire_policy", "misfire_grace_seconds",
    "overlap_policy", "next_run_at", "active_run_id", "resume_from", "jitter_seconds",
    "start_deadline_seconds", "active_from", "active_until", "end_after_occurrences", "occurrences_materialized",
    "calendar", "next_run_from", "directive_seq",
)


class DueSchedule:
    """A locked schedule as materialization sees it (MATERIALIZE_FIELDS). Building a model
    instance per row cost more than the rest of a wave's Python work."""

    __slots__ = MATERIALIZE_FIELDS

    def __init__(self, row, recurrences: dict):
        for name, value in zip(MATERIALIZE_FIELDS, row):
            setattr(self, name, value)
        # Rows read with one cache share one decoded rule per distinct text (WavePlans keys
        # on it). PostgreSQL rows carry the text; SQLite's come decoded.
        rule = self.recurrence
        text = rule if isinstance(rule, str) else json.dumps(rule, sort_keys=True)
        self.recurrence = recurrences.get(text) or recurrences.setdefault(
            text, json.loads(text) if isinstance(rule, str) else rule
        )
        if isinstance(self.calendar, str):
            self.calendar = json.loads(self.calendar)


@dataclass
class ScanCycle:
    """One scan cycle (runs.loops.scan_pass). A run_all schedule that released its share of
    a backlog (RUN_ALL_PER_CYCLE) stays due, and is left alone for the rest of the cycle."""

    held: set[str] = field(default_factory=set)


def materialize_due(*, batch_size: int | None = None, buckets=None, cycle: ScanCycle | None = None,
                    ids=None) -> MaterializeStats:
    """One transaction: lock a batch of due schedules (skipping locked ones), insert their
    occurrences and dispatch intents, advance next_run_at. Any number of scanners may run.
    With ``ids`` (a scanner's fired timers) only those schedules, found by key, are looked at.
    Without a `cycle`, this call is a scan cycle of its own. Catch-up planning under the
    locks stays within bounds (runs/authority/catch_up_bounds.py): a schedule whose plan could take
    long is planned after the commit and written in a second transaction."""
    batch_size = batch_size or settings.SCAN_BATCH_SIZE
    recurrences: dict[str, dict] = {}
    with transaction.atomic(durable=True):
        held = cycle.held if cycle else ()
        schedules = (_lock_due(authority_now(), batch_size, buckets, recurrences, held=held) if ids is None
                     else _lock_among(authority_now(), batch_size, ids, recurrences, held=held))
        if not schedules:
            return MaterializeStats()
        plans = WavePlans(authority_now(), recurrences=recurrences)
        planned, too_long = plan_within_budget(plans, schedules, walk_limit=WALK_UNDER_LOCK)
        stats = _materialize(planned, plans.now, plan_of=plans.planned) if planned else MaterializeStats()
    committed(stats)
    written = planned
    if too_long:
        later, written_later = _materialize_planned_first(too_long, recurrences)
        stats.add(later)
        written = planned + written_later
    if cycle is not None:
        # Still due after materializing: only a run_all backlog beyond this cycle's share.
        cycle.held.update(s.id for s in written if s.next_run_at is not None and s.next_run_at <= plans.now)
    return stats


def committed(stats: MaterializeStats) -> None:
    metrics.MATERIALIZED.inc(stats.queued + stats.pending)
    failpoint("after_materialize_commit")


def _lock_due(now, batch_size: int, buckets, recurrences: dict, *, held=()) -> list[DueSchedule]:
    """Lock up to ``batch_size`` schedules due at ``now`` in ``buckets`` (default: all),
    except the ``held`` ones.

    Buckets are visited from a random offset: concurrent scanners start apart instead of
    skipping each other's locked rows.
    """
    # Each bucket once: a repeated one would return its rows twice (SKIP LOCKED does not
    # skip this transaction's own locks) and write each instant twice.
    buckets = list(dict.fromkeys(range(settings.DUE_BUCKETS) if buckets is None else buckets))
    start = random.randrange(len(buckets)) if buckets else 0
    buckets = buckets[start:] + buckets[:start]
    rows = schedules_lock_due(MATERIALIZE_FIELDS, buckets, now, batch_size, exclude=list(held))
    return [DueSchedule(row, recurrences) for row in rows]


def _lock_among(now, batch_size: int, ids, recurrences: dict, *, held=()) -> list[DueSchedule]:
    """Lock up to ``batch_size`` of the schedules ``ids`` that are due at ``now``."""
    rows = schedules_lock_due_among(MATERIALIZE_FIELDS, list(ids), now, batch_size, exclude=list(held))
    return [DueSchedule(row, recurrences) for row in rows]


def _materialize_planned_first(schedules: list[DueSchedule], recurrences: dict) -> tuple[MaterializeStats, list]:
    """Schedules whose catch-up could walk too long to plan under their locks: planned with
    no transaction open, then locked again and written if what their plans were made from
    is unchanged (an edit or another scanner in between leaves them for a later pass).
    Returns what it wrote and the schedules it wrote them for."""
    plans = WavePlans(authority_now(), recurrences=recurrences)
    planned, _ = plan_within_budget(plans, schedules)
    with transaction.atomic(durable=True):
        rows = schedules_lock_live(MATERIALIZE_FIELDS, [s.id for s in planned])
        unchanged = [s for s in (DueSchedule(row, recurrences) for row in rows) if plans.planned(s)]
        if not unchanged:
            return MaterializeStats(), []
        stats = _materialize(unchanged, authority_now(), plan_of=plans.planned)
    committed(stats)
    return stats, unchanged


def catch_up_on_resume(schedule: Schedule, now, planned: Planned) -> MaterializeStats:
    """Apply the misfire policy to the instants missed while paused (schedule is locked),
    as ``planned`` before the lock (runs/authority/resume.py)."""
    return _materialize([schedule], now, from_pause=True, plan_of=lambda _: planned)


def _materialize(schedules: list[DueSchedule | Schedule], now, *, from_pause=False, plan_of=None) -> MaterializeStats:
    """Write the schedules' occurrences as ``plan_of`` (default: planned here, at ``now``)."""
    wave = build_wave(schedules, now, plan_of=plan_of or WavePlans(now, from_pause=from_pause).plan)
    wave.drop_recorded_exclusions()
    bulk_insert(Run, wave.runs)
    bulk_insert(Outbox, wave.outbox)
    if wave.outbox:
        outbox_notify()
    if not from_pause:
        bulk_set(Schedule, schedules, ["next_run_at", "occurrences_materialized", "next_run_from"])
    wave.record_shadow()
    return wave.stats


def build_wave(schedules: list[DueSchedule | Schedule], now, *, plan_of, texts: dict | None = None) -> "Wave":
    """The rows of the schedules' occurrences as ``plan_of`` says, each schedule's
    next_run_at moved on (on the objects, not yet written). ``texts``: each schedule's
    revision payload text, when read before (runs/authority/armed_timers.py)."""
    job_types = {jt.name: jt for jt in JobType.objects.filter(name__in={s.job_type_id for s in schedules})}
    payloads = _current_payloads(schedules, job_types, texts)
    wave = Wave(now, _waiting_counts(schedules), len(schedules))
    plans = [(schedule, plan_of(schedule)) for schedule in schedules]
    directives = _directives(plans)
    for schedule, planned in plans:
        if planned is None:
            continue
        rule, plan = planned
        if wave.shadow:
            wave.shadow.observe(schedule, rule, plan)
        base = _run_base(schedule, payloads[schedule.id], now)
        wave.skip_missed(base, plan)
        wave.skip_excluded(base, plan)
        wave.add_instants(schedule, base, plan.run, directives, plan.shifted_from)
        schedule.next_run_at = plan.next_run_at
        if plan.walked_through is not None:
            schedule.next_run_from = plan.walked_through
        if rule.kind == "after_completion" and plan.run:
            schedule.next_run_at = None  # the next one is due when this one ends
        # endAfterOccurrences: counted here, in the transaction that holds the schedule's lock.
        schedule.occurrences_materialized += materialized_count(plan)
        if occurrences_left(schedule) == 0:
            schedule.next_run_at = None  # ended
    return wave


def _directives(plans: list[tuple]) -> dict[tuple[str, object], tuple[str, str]]:
    """The directives of the instants the plans run, ``{(schedule id, instant): (action,
    note)}``, read in the materializing transaction (schedule_services.directives says why that is
    enough). Only schedules that ever had one (directive_seq) are looked up."""
    pairs = [(schedule.id, at) for schedule, planned in plans
             if planned is not None and schedule.directive_seq for at in planned[1].run]
    return directives_read_live_at(pairs) if pairs else {}


def materialized_count(plan: CatchUpPlan) -> int:
    """Rule instants the plan materializes, whatever their outcome (run, skipped)."""
    return len(plan.run) + len(plan.skipped) + (plan.skipped_range.count if plan.skipped_range else 0)


def _run_base(schedule: DueSchedule | Schedule, payload: dict, now) -> dict:
    """The columns every occurrence of this schedule in this wave shares."""
    return {
        "schedule_id": schedule.id,
        "tenant_id": schedule.tenant_id,
        "trigger": Trigger.SCHEDULE,
        "revision": schedule.revision,
        "payload": payload,
        "job_type": schedule.job_type_id,
        "resource_class": payload["resourceClass"],
        "max_attempts": payload["retry"]["maxAttempts"],
        "created_at": now,
        # Its start promise: claims serve it first and it may take the reserved slots.
        "strict": schedule.start_deadline_seconds is not None,
    }


class Wave:
    """The run and outbox rows one materialization writes, and what it counted."""

    def __init__(self, now, waiting: dict[str, int], schedules: int):
        self.now = now
        self.waiting = waiting  # per schedule: admitted occurrences not holding the guard
        self.runs: list[dict] = []
        self.outbox: list[dict] = []
        self.stats = MaterializeStats(schedules=schedules)
        self.shadow = ShadowWave.active()

    def record_shadow(self) -> None:
        if self.shadow:
            metrics.SHADOW_DISAGREEMENTS.labels(self.shadow.name).inc(self.shadow.record())

    def skip_missed(self, base: dict, plan: CatchUpPlan) -> None:
        """The misfire policy's skipped instants, one record each, past a cap one range record."""
        skipped = dict(base, state=RunState.SKIPPED, skip_reason=SkipReason.MISFIRE, finished_at=self.now)
        if plan.skipped_range:
            span = plan.skipped_range
            self.runs.append(dict(skipped, id=new_run_id(), scheduled_at=span.first, due_at=span.first,
                                  skipped_count=span.count, skipped_through=span.last))
            self.stats.skipped += span.count
            metrics.SKIPPED.labels("misfire").inc(span.count)
        if plan.skipped:
            self.runs.extend(dict(skipped, id=new_run_id(), scheduled_at=at, due_at=at) for at in plan.skipped)
            self.stats.skipped += len(plan.skipped)
            metrics.SKIPPED.labels("misfire").inc(len(plan.skipped))

    def skip_excluded(self, base: dict, plan: CatchUpPlan) -> None:
        """The instants the schedule's calendars excluded: one skipped record each."""
        if plan.calendar_skipped:
            skipped = dict(base, state=RunState.SKIPPED, skip_reason=SkipReason.CALENDAR, finished_at=self.now)
            self.runs.extend(dict(skipped, id=new_run_id(), scheduled_at=at, due_at=at)
                             for at, _ in plan.calendar_skipped)
            self.stats.skipped += len(plan.calendar_skipped)
            metrics.SKIPPED.labels("calendar").inc(len(plan.calendar_skipped))

    def drop_recorded_exclusions(self) -> None:
        """Calendar-skipped records whose instant already has its occurrence (a backfill of the
        same past range wrote it first) are left out: one query, only when there are any."""
        excluded = [run for run in self.runs if run.get("skip_reason") == SkipReason.CALENDAR]
        if not excluded:
            return
        taken = set(Run.objects.filter(
            trigger=Trigger.SCHEDULE, schedule_id__in={run["schedule_id"] for run in excluded},
            scheduled_at__in={run["scheduled_at"] for run in excluded},
        ).values_list("schedule_id", "scheduled_at"))
        if taken:
            kept = [run for run in self.runs if run.get("skip_reason") != SkipReason.CALENDAR
                    or (run["schedule_id"], run["scheduled_at"]) not in taken]
            self.stats.skipped -= len(self.runs) - len(kept)
            self.runs = kept

    def add_instants(self, schedule: DueSchedule | Schedule, base: dict, instants, directives: dict,
                     shifted_from=None) -> None:
        """One occurrence per instant to run, as its directive says (skip, hold, note), else
        admitted by the schedule's overlap policy; an instant a calendar moved carries where from."""
        for instant in instants:
            due = jittered(schedule.id, instant, schedule.jitter_seconds)
            run = dict(base, id=new_run_id(), scheduled_at=instant, due_at=due)
            if shifted_from and instant in shifted_from:
                run["shifted_from"] = shifted_from[instant]
            action, note = directives.get((schedule.id, instant), ("", ""))
            if note:
                run["note"] = note
            if action == DirectiveAction.SKIP:
                run.update(state=RunState.SKIPPED, skip_reason=SkipReason.DIRECTIVE, finished_at=self.now)
                self.stats.skipped += 1
                metrics.SKIPPED.labels("directive").inc()
                self.runs.append(run)
                continue
            if action == DirectiveAction.HOLD:  # set aside: no place in the overlap queue until released
                run.update(state=RunState.PENDING, pending_reason=PendingReason.HELD)
                self.stats.pending += 1
                self.runs.append(run)
                continue
            waiters = self.waiting.get(schedule.id, 0)
            step = admit(schedule.overlap_policy, guard=schedule.active_run_id, waiting=waiters, new=True)
            if step is Step.START and due > self.now:  # jittered: promoted when due (promote_due_runs)
                run.update(state=RunState.PENDING, pending_reason=PendingReason.NOT_DUE)
                self.stats.pending += 1
            elif step is Step.START:
                run["state"] = RunState.QUEUED
                run["dispatch_count"] = 1
                self.outbox.append(dispatch_row(run["id"], 1, run["resource_class"], self.now))
                self.stats.queued += 1
            elif step is Step.SKIP:
                run.update(state=RunState.SKIPPED, skip_reason=SkipReason.OVERLAP, finished_at=self.now)
                self.stats.skipped += 1
                metrics.SKIPPED.labels("overlap").inc()
            else:
                run.update(state=RunState.PENDING, pending_reason=PendingReason.OVERLAP)
                self.stats.pending += 1
            if step is not Step.SKIP:
                self.waiting[schedule.id] = waiters + 1  # queued or waiting: ahead of the next instant
            self.runs.append(run)


def _current_payloads(schedules: list[DueSchedule | Schedule], job_types: dict[str, JobType],
                      texts: dict[str, str] | None = None) -> dict[str, dict]:
    """Each schedule's run payload for its current revision. Schedules of a wave share their
    payload text: each distinct one is decoded and built once, and the result shared."""
    texts = revision_texts(schedules) if texts is None else texts
    built: dict[tuple, dict] = {}
    payloads = {}
    for schedule in schedules:
        text = texts.get(schedule.id)
        if text is not None:
            key = (schedule.job_type_id, text)
            payload = built.get(key)
            if payload is None:
                payload = built[key] = run_payload(json.loads(text), job_types[key[0]])
            payloads[schedule.id] = payload
    return payloads


def revision_texts(schedules: list[DueSchedule | Schedule]) -> dict[str, str]:
    """Each schedule's current revision's payload text; schedules sharing one share the string."""
    return {
        schedule_id: text
        for text, schedule_ids in revisions_read_payloads({s.id: s.revision for s in schedules})
        for schedule_id in schedule_ids
    }


def _waiting_counts(schedules: list[DueSchedule | Schedule]) -> dict[str, int]:
    """Active occurrences not holding the guard, per schedule: the overlap policy's queue."""
    exclusive = [s.id for s in schedules if takes_guard(s.overlap_policy)]
    counts: dict[str, int] = {}
    for schedule_id in Run.objects.filter(
        UNFINISHED, schedule_id__in=exclusive, holds_guard=False
    ).exclude(pending_reason=PendingReason.HELD).values_list("schedule_id", flat=True):
        counts[schedule_id] = counts.get(schedule_id, 0) + 1
    return counts


def run_payload(revision_payload: dict, job_type: JobType) -> dict:
    """The snapshot every attempt of an occurrence executes, whatever later edits do."""
    return {
        "jobType": job_type.name,
        "params": revision_payload["params"],
        "paramsSchemaVersion": job_type.params_schema_version,
        "resourceClass": job_type.resource_class,
        "leaseSeconds": job_type.default_lease_seconds,
        "timeoutSeconds": job_type.timeout_seconds,
        "retry": revision_payload["retry"],
        "effects": revision_payload.get("effects") or {},
        "scheduleName": revision_payload.get("name", ""),
    }
