"""The claim's statements, written out: a claim is the hottest transaction there is, and
compiling its queries through the ORM cost more CPU than PostgreSQL spent running them.
Each is one SQL text for both databases (the dialect kit spells the differences); times
are the database's own (``now_sql``), never this process's clock.

A claim locks in the order of runs/authority/locks.py: the reserve's resource classes (an
advisory lock, before any tenant), tenants in id order, then each tenant's candidate runs
and their schedules, skipping locked ones.
"""

from __future__ import annotations

import zlib

from kernel.rows import Rows
from runs.authority.statements import dialect
from runs.authority.statements.dialect import among, count_capped, fetch, insert_values, now_sql, row_locks
from runs.models import Attempt, Run, RunState, WorkerSlots
from schedules.models import DEFAULT_CONCURRENCY_LIMIT, ConcurrencyLimit, Schedule, Tenant

RUN, TENANT, SCHEDULE = Run._meta.db_table, Tenant._meta.db_table, Schedule._meta.db_table
CONCURRENCY_LIMIT, SLOTS = ConcurrencyLimit._meta.db_table, WorkerSlots._meta.db_table
ATTEMPT, ATTEMPT_FIELDS = Attempt._meta.db_table, Attempt._meta.concrete_fields
# A claim's candidates, whole (the worker reads their payload); their schedules, with what a claim
# decides and a worker reads. Built by kernel.rows: a third of what Django's constructor costs.
CANDIDATE = Rows(Run)
CLAIMED_SCHEDULE = Rows(Schedule, ("id", "overlap_policy", "active_run", "concurrency_key", "recurrence"))

RESERVE_LOCK_SPACE = 17_001  # first key of pg_advisory_xact_lock(int, int): the reserve's class locks


def _claimable(classes, job_types=None, alias: str = "r") -> tuple[str, list]:
    """Queued runs due now in ``classes``, of ``job_types`` when given: a condition on ``alias``."""
    in_classes, params = among(f"{alias}.resource_class", classes)
    # Written out, not bound: a generic plan must still see run_claimable_strict_idx (dialect.cursor).
    sql = f"{alias}.state = '{RunState.QUEUED}' AND {alias}.due_at <= {now_sql()} AND {in_classes}"
    if job_types is not None:
        in_types, type_params = among(f"{alias}.job_type", job_types) if job_types else ("1 = 0", [])
        sql, params = f"{sql} AND {in_types}", params + type_params
    return sql, params


def runs_claimable_exist(classes, job_types=None) -> bool:
    """Whether any run of ``classes`` (of ``job_types`` when given) is queued and due now.
    No lock held or taken: a probe."""
    condition, params = _claimable(classes, job_types)
    return bool(fetch(f"SELECT 1 FROM {RUN} AS r WHERE {condition} LIMIT 1", params))


def _running_count(tenant: str = "t") -> str:
    """A tenant's running runs, as a column of a query over tenants aliased ``tenant``. On
    PostgreSQL the count stops at the tenant's limit, so a claim costs what the limit
    allows, not what is running. Exact only for a tenant this transaction has locked, and
    only in a statement after the lock: the locking statement's own snapshot predates its wait."""
    running = f"SELECT 1 FROM {RUN} AS rc WHERE rc.tenant_id = {tenant}.id AND rc.state = '{RunState.RUNNING}'"
    return count_capped(running, f"{tenant}.max_active_runs")


def live_slots(resource_class: str) -> tuple[str, list]:
    """A column of tenants_read_loads: the class's slots reported by live worker processes."""
    return f"COALESCE((SELECT sum(slots) FROM {SLOTS} WHERE resource_class = %s AND expires_at > {now_sql()}), 0)", [
        resource_class
    ]


def running_ordinary(resource_class: str) -> tuple[str, list]:
    """A column of tenants_read_loads and tenants_recount: the class's running runs without
    a start promise."""
    return (
        f"(SELECT count(*) FROM {RUN} AS ro WHERE ro.state = '{RunState.RUNNING}' AND NOT ro.strict"
        f" AND ro.resource_class = %s)"
    ), [resource_class]


def tenants_read_loads(classes, job_types, extra: list[tuple[str, list]]) -> list[tuple]:
    """Tenants with claimable work: (id, weight, max active runs, due instant and strictness
    of their first run in claim order, running count, whether it uses concurrency keys,
    *``extra`` columns). No lock held or taken: what the claim then locks is recounted."""
    condition, params = _claimable(classes, job_types)
    def first(column):
        return f"(SELECT r.{column} FROM {RUN} AS r WHERE r.tenant_id = t.id AND {condition}" \
               f" ORDER BY r.strict DESC, r.due_at LIMIT 1)"

    columns = "".join(f", {sql}" for sql, _ in extra)
    sql = (
        f"SELECT * FROM (SELECT t.id, t.weight, t.max_active_runs, {first('due_at')} AS oldest,"
        f" {first('strict')} AS urgent, {_running_count()} AS running, t.uses_concurrency_keys{columns}"
        f" FROM {TENANT} AS t) AS loads"
        f" WHERE oldest IS NOT NULL"
    )
    return fetch(sql, [*params, *params, *(p for _, extra_params in extra for p in extra_params)])


def resource_classes_lock_reserved(classes: list[str]) -> None:
    """Lock these resource classes for their reserve (a transaction-level advisory lock per
    class, in one order), so claimers racing for a class's last ordinary slots take turns.
    The caller holds no tenant lock yet: classes come first. Nothing on the embedded SQLite,
    which has one writer at a time."""
    if not dialect.postgresql():
        return
    keys = [zlib.crc32(rc.encode()) & 0x7FFFFFFF for rc in classes]
    dialect.execute("SELECT pg_advisory_xact_lock(%s, k) FROM (SELECT unnest(%s::int[]) AS k ORDER BY 1) AS keys",
                    [RESERVE_LOCK_SPACE, sorted(keys)])


def tenants_lock(ids: list[str], *, skip_locked: bool) -> set[str]:
    """Lock these tenants' rows in id order; the ids actually locked. The caller holds no
    schedule or run lock (tenants come first)."""
    if not ids:
        return set()
    condition, params = among("id", ids)
    return {row[0] for row in fetch(f"SELECT id FROM {TENANT} WHERE {condition} ORDER BY id{row_locks(skip_locked)}",
                                    params)}


def tenants_recount(ids, extra: list[tuple[str, list]]) -> list[tuple]:
    """(id, running count, *``extra`` columns) of these tenants, read now. Exact for the
    tenants the caller has locked (tenants_lock) in an earlier statement."""
    if not ids:
        return []
    condition, params = among("t.id", ids)
    columns = "".join(f", {sql}" for sql, _ in extra)
    extra_params = [p for _, extra_params in extra for p in extra_params]
    return fetch(f"SELECT t.id, {_running_count()}{columns} FROM {TENANT} AS t WHERE {condition}",
                 [*extra_params, *params])


def keys_read_rooms(tenant_id: str) -> dict[str, int]:
    """{concurrency key: attempts that may still start} for the tenant's keys with attempts
    running: the key's limit (DEFAULT_CONCURRENCY_LIMIT without one) less those running, a run
    counting under its schedule's key. Exact only under the tenant's lock, which the caller
    holds (tenants_lock)."""
    sql = (
        f"SELECT s.concurrency_key, COALESCE(MAX(l.max_running), {DEFAULT_CONCURRENCY_LIMIT}) - count(*)"
        f" FROM {RUN} AS r JOIN {SCHEDULE} AS s ON s.id = r.schedule_id"
        f" LEFT JOIN {CONCURRENCY_LIMIT} AS l ON l.tenant_id = r.tenant_id AND l.key = s.concurrency_key"
        f" WHERE r.tenant_id = %s AND r.state = '{RunState.RUNNING}' AND s.concurrency_key <> ''"
        f" GROUP BY s.concurrency_key"
    )
    return dict(fetch(sql, [tenant_id]))


def keys_read_limits(tenant_id: str, keys) -> dict[str, int]:
    """{key: its limit} for those of the tenant's ``keys`` (non-empty) with one set. The
    caller holds the tenant's lock."""
    condition, params = among("key", keys)
    return dict(fetch(f"SELECT key, max_running FROM {CONCURRENCY_LIMIT} WHERE tenant_id = %s AND {condition}",
                      [tenant_id, *params]))


def runs_lock_candidates(tenant_id: str, classes, job_types, closed: list[str], limit: int,
                         full_keys: list[str] = ()) -> list[Run]:
    """Lock up to ``limit`` of the tenant's claimable runs, strict ones first, then by due
    instant, skipping locked ones; ordinary runs of the ``closed`` classes are left, and so
    are runs of schedules whose concurrency key is one of ``full_keys``. The caller holds
    the tenant's lock; the candidates' schedules are locked after them
    (schedules_lock_for_claim, skipping locked ones, so the inverted order cannot wait)."""
    condition, params = _claimable(classes, job_types)
    if closed:
        in_closed, closed_params = among("r.resource_class", closed)
        condition, params = f"{condition} AND (r.strict OR NOT {in_closed})", params + closed_params
    if full_keys:
        in_full, full_params = among("s.concurrency_key", full_keys)
        condition = f"{condition} AND NOT EXISTS (SELECT 1 FROM {SCHEDULE} AS s WHERE s.id = r.schedule_id AND {in_full})"
        params = params + full_params
    sql = (
        f"SELECT {CANDIDATE.columns('r')} FROM {RUN} AS r WHERE r.tenant_id = %s AND {condition}"
        f" ORDER BY r.strict DESC, r.due_at, r.id LIMIT %s{row_locks()}"
    )
    return CANDIDATE.read(sql, [tenant_id, *params, limit], prepared=dialect.preparing())


def schedules_lock_for_claim(ids) -> dict[str, Schedule]:
    """Lock these schedules (of a claim's candidates), skipping locked ones. Loaded: what a
    claim decides and a worker reads (overlap policy, guard, concurrency key, rule); the
    other fields load when asked for. The caller holds the tenant's lock and the candidates'."""
    condition, params = among("id", sorted(ids))
    sql = f"SELECT {CLAIMED_SCHEDULE.columns(SCHEDULE)} FROM {SCHEDULE} WHERE {condition}{row_locks()}"
    return {s.id: s for s in CLAIMED_SCHEDULE.read(sql, params, prepared=dialect.preparing())}


def attempts_insert(attempts: list[Attempt]) -> None:
    """Insert new attempts, every column given, in one statement. The caller holds their
    runs' locks."""
    if not attempts:
        return
    columns = ", ".join(f'"{f.column}"' for f in ATTEMPT_FIELDS)
    row = f"({', '.join(['%s'] * len(ATTEMPT_FIELDS))})"
    dialect.execute(f"INSERT INTO {ATTEMPT} ({columns}) VALUES {', '.join([row] * len(attempts))}",
                    insert_values(ATTEMPT_FIELDS, attempts), prepared=False)  # a text per number of rows
