"""Claims: free slots get claimable occurrences, weighted-fair across tenants; each claim
allocates a new fence and starts an attempt under a lease."""

from django.conf import settings
from django.db import transaction

from schedules.models import DEFAULT_CONCURRENCY_LIMIT, Schedule
from runs.authority.statements.claim import (
    attempts_insert, keys_read_limits, keys_read_rooms, runs_claimable_exist, runs_lock_candidates,
    schedules_lock_for_claim, tenants_lock, tenants_read_loads, tenants_recount,
)
from runs.authority.leases import attempt_deadline, clamp_lease, lease_until
from runs import metrics
from runs.authority.reserve import Reserve
from runs.authority.statements.outbox import outbox_mark_dispatched
from runs.authority.statements.rows import bulk_set
from kernel.clock import authority_now
from runs.fair_share import TenantLoad, allocate_slots
from runs.overlap import Step, admit, takes_guard
from runs.models import Attempt, PendingReason, Run, RunState, owed_since

CLAIM_ROUNDS = 3  # allocation rounds per claim_many when guards or locks pass over candidates


def claim(*, worker_token=None, worker_label="", resource_classes=None, lease_seconds=None,
          job_types=None) -> Run | None:
    runs = claim_many(
        n=1,
        worker_token=worker_token,
        worker_label=worker_label,
        resource_classes=resource_classes,
        lease_seconds=lease_seconds,
        job_types=job_types,
    )
    return runs[0] if runs else None


def claim_many(*, n: int, worker_token=None, worker_label="", resource_classes=None, lease_seconds=None,
               job_types=None) -> list[Run]:
    """Claim up to ``n`` claimable runs in one transaction, weighted-fair across tenants.

    Slots are allocated from an unlocked read of each tenant's load. Only the tenants that
    get slots are then locked, so claims for different tenants run in parallel; a tenant's
    claims serialize on its row, and its running count is read again under that lock, so its
    active-run limit holds exactly. The first round waits for its tenant locks, taken in id
    order; later rounds skip tenants locked by another claimer (which is serving them), so
    claimers never wait on each other in a cycle. Runs and schedules are taken with SKIP
    LOCKED: a claim never waits on a scanner or a completion. Within a tenant's slots strict
    runs come first, and ordinary ones stop at the capacity reserved for strict work
    (runs.authority.reserve).

    ``job_types``, when given, are the job types the caller has code for: runs of any other
    type stay queued for a process that has it (mixed deployments during a rollout; see
    runs.authority.unknown_job_types).
    """
    classes = list(resource_classes or settings.RESOURCE_CLASSES)
    claimed: list[Run] = []
    reserve = Reserve(classes)
    with transaction.atomic(durable=True):
        loads, keyed = _tenant_loads(classes, reserve, job_types)
        if not loads:
            return []
        reserve.lock_open_classes()  # before any tenant lock: claimers lock in one order
        locked: set[str] = set()
        exhausted: set[str] = set()
        for round_number in range(CLAIM_ROUNDS):
            wanted = n - len(claimed)
            if wanted <= 0:
                break
            shares = allocate_slots([l for t, l in loads.items() if t not in exhausted], wanted)
            if not shares:
                break
            newly = tenants_lock(sorted(set(shares) - locked), skip_locked=round_number > 0)
            locked |= newly
            for tenant_id, running, *reserved in tenants_recount(newly, reserve.running_columns()):
                load = loads[tenant_id]
                # The exact counts, now that claims of this tenant (and of the locked classes) wait for us.
                loads[tenant_id] = TenantLoad(tenant_id, load.weight, running, load.max_running)
                reserve.read_recount_row(reserved)
            for tenant_id, share in shares.items():
                load = loads[tenant_id]
                share = min(share, load.max_running - load.running)
                if tenant_id not in locked or share <= 0:
                    exhausted.add(tenant_id)
                    continue
                got = _claim_for_tenant(tenant_id, share, (classes, job_types), reserve,
                                        (worker_token, worker_label, lease_seconds), tenant_id in keyed)
                claimed.extend(got)
                loads[tenant_id] = TenantLoad(tenant_id, load.weight, load.running + len(got), load.max_running)
                if len(got) < share:
                    exhausted.add(tenant_id)
        if claimed:
            outbox_mark_dispatched([r.id for r in claimed])
    _observe(claimed)
    return claimed


def claimable_exists(*, resource_classes, job_types=None) -> bool:
    """Whether any run of ``resource_classes`` (of ``job_types`` when given) is claimable now:
    one read of the queued runs' partial index, the cheap question before a claim."""
    return runs_claimable_exist(list(resource_classes), job_types)


def _tenant_loads(classes: list[str], reserve: Reserve, job_types=None) -> tuple[dict[str, TenantLoad], set[str]]:
    """Tenants with claimable work in ``classes`` (of ``job_types``) and their unlocked running
    counts, those with a strict run waiting first, then the tenant whose first run in claim
    order is the oldest (allocation breaks ties in this order); and those of them using
    concurrency keys. The reserve reads its classes' figures from the same statement."""
    rows = tenants_read_loads(classes, job_types, reserve.live_columns())
    if rows:
        reserve.read_loads_row(rows[0][7:])  # the reserve's columns, the same on every row
    rows.sort(key=lambda row: (not row[4], row[3], row[0]))  # (not urgent, oldest, id)
    loads = {
        tenant_id: TenantLoad(tenant_id, weight, running, max_running)
        for tenant_id, weight, max_running, _oldest, _urgent, running, *_ in rows
    }
    return loads, {row[0] for row in rows if row[6]}


def _observe(claimed: list[Run]) -> None:
    for run in claimed:
        started = run.current_attempt.started_at
        origin = dict(created_at=run.created_at, trigger=run.trigger, backfilled=run.backfilled)
        delay = started - owed_since(run.due_at, **origin)
        metrics.QUEUE_DELAY.labels(run.resource_class).observe(max(0.0, delay.total_seconds()))
        if run.attempt_count == 1:
            lateness = started - owed_since(run.scheduled_at, **origin)
            metrics.DUE_TO_START.labels(run.tenant_id, run.resource_class).observe(max(0.0, lateness.total_seconds()))


def _claim_for_tenant(tenant_id, share, claimable, reserve: Reserve, worker, keyed: bool) -> list[Run]:
    """Up to ``share`` of the tenant's ``claimable`` runs ((classes, job types)), strict
    ones first, then by due instant; ordinary ones only as far as the reserve leaves room,
    and those of a concurrency key only as far as its limit does (a `keyed` tenant's full keys
    are left out of the candidates, so they never take its share). ``worker``: (token,
    label, lease seconds)."""
    keys = _KeyRooms(tenant_id, keys_read_rooms(tenant_id) if keyed else None)
    candidates = runs_lock_candidates(tenant_id, *claimable, reserve.closed(), share, keys.full())
    if not candidates:
        return []
    schedules = schedules_lock_for_claim({r.schedule_id for r in candidates})
    keys.know({s.concurrency_key for s in schedules.values() if s.concurrency_key})
    now = authority_now()
    claimed, blocked, attempts, guarded = [], [], [], {}
    for run in candidates:
        schedule = schedules.get(run.schedule_id)
        if schedule is None:
            continue  # its schedule is being changed right now; a later claim takes it
        policy = schedule.overlap_policy
        if admit(policy, guard=schedule.active_run_id, run_id=run.id, new=False) is Step.WAIT:
            run.state, run.pending_reason = RunState.PENDING, PendingReason.OVERLAP
            blocked.append(run)
            continue
        if not keys.room(schedule.concurrency_key):
            continue  # waits queued (pendingReason concurrency_key) for an attempt of its key to end
        if not reserve.take(run):
            continue  # ordinary, and its class's unreserved slots are taken by now
        keys.take(schedule.concurrency_key)
        if takes_guard(policy):
            if schedule.active_run_id is None:
                schedule.active_run_id = run.id
                guarded[schedule.id] = schedule
            run.holds_guard = True
        attempts.append(_start_attempt(run, now, *worker))
        run.schedule = schedule  # the worker reads its rule (timezone); it is loaded already
        claimed.append(run)
    attempts_insert(attempts)
    bulk_set(Run, blocked, ["state", "pending_reason"])
    bulk_set(Schedule, list(guarded.values()), ["active_run"])
    if claimed:
        bulk_set(
            Run,
            claimed,
            ["state", "pending_reason", "fence", "attempt_count", "lease_expires_at", "started_at",
             "current_attempt", "holds_guard"],
        )
    return claimed


class _KeyRooms:
    """How many more attempts of each of a tenant's concurrency keys this claim may start,
    read under the tenant's lock (keys_read_rooms), the keys without running attempts
    read when a candidate has one."""

    def __init__(self, tenant_id: str, rooms: dict[str, int] | None):
        self.tenant_id, self.rooms = tenant_id, rooms

    def full(self) -> list[str]:
        return sorted(key for key, room in (self.rooms or {}).items() if room <= 0)

    def know(self, keys: set[str]) -> None:
        if not keys:
            return
        if self.rooms is None:  # a tenant not known to use keys until now
            self.rooms = keys_read_rooms(self.tenant_id)
        fresh = keys - self.rooms.keys()
        if fresh:
            limits = keys_read_limits(self.tenant_id, sorted(fresh))
            self.rooms.update({key: limits.get(key, DEFAULT_CONCURRENCY_LIMIT) for key in fresh})

    def room(self, key: str) -> bool:
        return not key or self.rooms[key] > 0

    def take(self, key: str) -> None:
        if key:
            self.rooms[key] -= 1


def _start_attempt(run: Run, now, worker_token, worker_label: str, lease_seconds) -> Attempt:
    """A new attempt with the next fence, and the run (in memory) running under its lease."""
    seconds = clamp_lease(lease_seconds or run.payload.get("leaseSeconds", 30))
    run.fence += 1
    run.attempt_count += 1
    deadline = attempt_deadline(now, run.payload)
    attempt = Attempt(
        run=run,
        number=run.attempt_count,
        fence=run.fence,
        worker_label=worker_label[:200],
        worker_token=worker_token,
        lease_seconds=seconds,
        started_at=now,
        deadline_at=deadline,
        lease_expires_at=lease_until(now, seconds, deadline),
    )
    run.state = RunState.RUNNING
    run.pending_reason = PendingReason.NONE
    run.lease_expires_at = attempt.lease_expires_at
    run.started_at = run.started_at or now
    run.current_attempt = attempt
    return attempt
