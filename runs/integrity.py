"""The invariants a restore, a failover or a bug must leave intact, checked on any scheduler
database (and its object store) by `manage.py verify_integrity`.

* one occurrence per (schedule, instant), and no occurrence inside a skipped range record;
* one canonical result per succeeded run: a referenced registry row matching the run's
  result pointer and accepted attempt, and nothing referenced by a run that did not succeed;
* that object exists in the store at the recorded version with the recorded checksum;
* no object a retained result points to is marked deleting or deleted;
* every queued run has a dispatch outbox row not yet processed;
* fences: a run's fence is its newest attempt's, and attempt_count counts its attempts;
* finished_at is set exactly on runs in a terminal state (the live indexes rely on it).

Each check is a few set-based queries, so it runs on a production-sized database.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q
from django.db.models.functions import Coalesce

from objectstore import ObjectMissing, get_object_store
from runs.models import (
    ACTIVE_STATES, TERMINAL_STATES, UNFINISHED, Attempt, ObjectState, Outbox, OutboxKind, Run, RunState, StoredObject,
    Trigger,
)
from schedules.models import RequestKey, Schedule, Tenant
from kernel.clock import authority_now

EXAMPLES = 5  # violations named per invariant; the count covers all of them
HEAD_THREADS = 8


@dataclass
class Check:
    invariant: str
    checked: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    def found(self, examples: list[str], count: int | None = None) -> None:
        self.violations += len(examples) if count is None else count
        self.examples += examples[: EXAMPLES - len(self.examples)]

    def found_in(self, rows, describe) -> None:
        """Every row of the queryset ``rows`` is a violation; the first ones described."""
        self.found([describe(row) for row in rows[:EXAMPLES]], rows.count())

    @property
    def ok(self) -> bool:
        return self.violations == 0


def verify_integrity(*, check_store: bool = True, store=None, progress=None) -> tuple[dict[str, int], list[Check]]:
    """What the database holds, and every invariant's check in the order of the module
    docstring. The database is read in one snapshot; the store is asked afterwards.
    ``progress(total)``, if given, is a context manager yielding ``advance(n)`` for the store HEADs."""
    with _snapshot():
        found = inventory()
        checks = [one_occurrence_per_instant(), canonical_results(), retained_objects_kept(),
                  queued_runs_dispatched(), fences_consistent(), finished_exactly_when_terminal(found["runs"])]
        referenced = list(
            StoredObject.objects.filter(state=ObjectState.REFERENCED).values_list("key", "version_id", "checksum")
        )
    if check_store:
        checks.insert(2, stored_results(referenced, store or get_object_store(), progress=progress))
    return found, checks


@contextmanager
def _snapshot():
    """One read-only snapshot for every query, as a live system keeps changing; joins by
    hash or merge, linear however stale the statistics (a fresh restore has none)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cursor.execute("SET LOCAL enable_nestloop = off")
        yield


def inventory() -> dict[str, int]:
    """What the database holds, for comparing a restored copy with what was backed up."""
    counts = {
        "tenants": Tenant.objects.count(),
        "schedules": Schedule.objects.count(),
        "runs": Run.objects.count(),
        "attempts": Attempt.objects.count(),
        "outbox": Outbox.objects.count(),
        "stored_objects": StoredObject.objects.count(),
        "request_keys": RequestKey.objects.count(),
    }
    for state, n in Run.objects.values_list("state").annotate(n=Count("id")).order_by("state"):
        counts[f"runs.{state}"] = n
    counts["max_fence"] = Run.objects.aggregate(m=Coalesce(Max("fence"), 0))["m"]
    return counts


def one_occurrence_per_instant() -> Check:
    check = Check("one occurrence per (schedule, instant)")
    scheduled = Run.objects.filter(trigger=Trigger.SCHEDULE)
    check.checked = scheduled.count()
    doubled = (
        scheduled.values("schedule_id", "scheduled_at").annotate(n=Count("id")).filter(n__gt=1)
        .order_by("schedule_id", "scheduled_at")
    )
    check.found_in(doubled, lambda d: f"{d['schedule_id']} @ {d['scheduled_at'].isoformat()} x{d['n']}")
    covering = Run.objects.filter(
        schedule_id=OuterRef("schedule_id"), skipped_count__isnull=False,
        scheduled_at__lte=OuterRef("scheduled_at"), skipped_through__gte=OuterRef("scheduled_at"),
    ).exclude(id=OuterRef("id"))
    inside = scheduled.filter(Exists(covering)).order_by("id").values_list("id", flat=True)
    check.found_in(inside, lambda run_id: f"{run_id} lies inside a skipped range of its schedule")
    return check


def canonical_results() -> Check:
    check = Check("one canonical result per succeeded run")
    succeeded = Run.objects.filter(state=RunState.SUCCEEDED)
    check.checked = succeeded.count()
    matching = StoredObject.objects.filter(
        run_id=OuterRef("id"), state=ObjectState.REFERENCED, key=OuterRef("result_key"),
        version_id=OuterRef("result_version_id"), checksum=OuterRef("result_checksum"),
        attempt_id=OuterRef("accepted_attempt_id"),
    )
    unmatched = succeeded.exclude(Exists(matching)).exclude(_retired()).order_by("id").values_list("id", flat=True)
    check.found_in(unmatched, lambda run_id: f"{run_id}: no referenced object matches its result pointer and "
                                             f"accepted attempt")
    referenced = StoredObject.objects.filter(state=ObjectState.REFERENCED)
    stray = referenced.exclude(run__state=RunState.SUCCEEDED).order_by("id").values_list("key", "run_id", "run__state")
    check.found_in(stray, lambda row: "{} is referenced by {}, which is {}".format(*row))
    several = referenced.values("run_id").annotate(n=Count("id")).filter(n__gt=1).order_by("run_id")
    check.found_in(several, lambda s: f"{s['run_id']} has {s['n']} referenced objects")
    return check


def stored_results(rows, store, *, progress=None) -> Check:
    """HEAD every referenced object's (key, version_id, checksum) row: the store holds that
    version with that checksum. Outside any transaction: it takes as long as the store does."""
    check = Check("every canonical result exists in the object store")
    check.checked = len(rows)
    if progress is None:
        check.found(missing_or_altered(rows, store))
    else:
        with progress(len(rows)) as advance:
            check.found(missing_or_altered(rows, store, advance=advance))
    return check


def missing_or_altered(rows, store, *, advance=lambda n=1: None) -> list[str]:
    """Problems of (key, version_id, checksum) rows in ``store``: absent, or another checksum."""
    def head(row):
        try:
            return _head(row)
        finally:
            advance(1)

    def _head(row):
        key, version_id, checksum = row
        try:
            stored = store.head(key, version_id)
        except ObjectMissing:
            return f"{key}@{version_id} missing from the store"
        if stored.checksum != checksum:
            return f"{key}@{version_id}: the store has {stored.checksum}, the database {checksum}"
        return None

    with ThreadPoolExecutor(HEAD_THREADS) as pool:
        return [problem for problem in pool.map(head, rows) if problem]


def retained_objects_kept() -> Check:
    check = Check("no retained result's object is marked deleted")
    pointed = StoredObject.objects.filter(run__result_key=F("key"))
    check.checked = pointed.count()
    gone = pointed.filter(state__in=(ObjectState.DELETING, ObjectState.DELETED)).exclude(
        run__finished_at__lte=_retention_cutoff()
    ).order_by("id").values_list("key", "state", "run_id")
    check.found_in(gone, lambda row: "{} ({}) is the retained result of {}".format(*row))
    return check


def queued_runs_dispatched() -> Check:
    check = Check("every queued run has a dispatch outbox row")
    queued = Run.objects.filter(state=RunState.QUEUED)
    check.checked = queued.count()
    intent = Outbox.objects.filter(run_id=OuterRef("id"), kind=OutboxKind.DISPATCH, processed_at__isnull=True)
    undispatched = queued.exclude(Exists(intent)).order_by("id").values_list("id", flat=True)
    check.found_in(undispatched, lambda run_id: f"{run_id} is queued with no unprocessed dispatch row")
    return check


def finished_exactly_when_terminal(runs: int) -> Check:
    """The live indexes (runs.models.UNFINISHED) find a schedule's active runs by finished_at:
    a run in an active state with it set, or a finished one without, is missing from them.
    ``runs``: how many runs there are (the inventory counted them in this snapshot)."""
    check = Check("a run has finished_at exactly when its state is terminal")
    check.checked = runs
    wrong = Run.objects.filter(
        (UNFINISHED & Q(state__in=TERMINAL_STATES)) | (Q(finished_at__isnull=False) & Q(state__in=ACTIVE_STATES))
    ).order_by("id").values_list("id", "state", "finished_at")
    check.found_in(wrong, lambda row: "{} is {} with finished_at {}".format(*row))
    return check


def fences_consistent() -> Check:
    check = Check("a run's fence is its newest attempt's")
    runs = Run.objects.filter(attempt_count__gt=0)
    check.checked = runs.count()
    wrong = runs.annotate(newest=Max("attempts__fence"), attempts_made=Count("attempts")).filter(
        ~Q(fence=F("newest")) | ~Q(attempt_count=F("attempts_made"))
    ).order_by("id")
    check.found_in(wrong, lambda r: f"{r.id}: fence {r.fence}, newest attempt fence {r.newest}, "
                                    f"attempt_count {r.attempt_count} of {r.attempts_made} attempts")
    return check


def _retired() -> Q:
    """A result retention has expired: its object may be gone with its reference."""
    return Q(finished_at__lte=_retention_cutoff()) & ~Exists(
        StoredObject.objects.filter(run_id=OuterRef("id"), state=ObjectState.REFERENCED)
    )


def _retention_cutoff():
    return authority_now() - timedelta(days=settings.OBJECT_RETENTION_DAYS)
