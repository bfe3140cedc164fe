"""The claim's statements, written out: a claim is the hottest transaction there is, and
compiling its queries through the ORM cost more CPU than PostgreSQL spent running them.

Each statement is one SQL text for both vendors. PostgreSQL binds a list as one array
parameter (``= ANY(%s)``) and takes row locks with SKIP LOCKED; the embedded SQLite gets
the list spelled out and no row locks (it has one writer at a time). Times are the
database's own (``NOW``), never this process's clock.
"""

from __future__ import annotations

import datetime
import decimal
import uuid

from django.db import connection
from django.db.models import BooleanField, Case, Q, Value, When

from runs.models import Attempt, Outbox, OutboxKind, Run, RunState, WorkerSlots
from schedules.models import DEFAULT_CONCURRENCY_LIMIT, ConcurrencyLimit, Schedule, Tenant

RUN, TENANT, SCHEDULE = Run._meta.db_table, Tenant._meta.db_table, Schedule._meta.db_table
CONCURRENCY_LIMIT = ConcurrencyLimit._meta.db_table
OUTBOX, SLOTS = Outbox._meta.db_table, WorkerSlots._meta.db_table
ATTEMPT, ATTEMPT_FIELDS = Attempt._meta.db_table, Attempt._meta.concrete_fields


SQLITE_NOW = "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')"


def now_sql() -> str:
    """The statement's time, as Django's Now() renders it."""
    return "STATEMENT_TIMESTAMP()" if connection.vendor == "postgresql" else SQLITE_NOW


def clock_sql() -> str:
    """The time as the statement reads it, after any lock wait (on SQLite the statement's:
    its transactions take the write lock when they begin)."""
    return "clock_timestamp()" if connection.vendor == "postgresql" else SQLITE_NOW


ARRAY_ELEMENT_TYPES = (str, int, float, decimal.Decimal, datetime.date, datetime.time, uuid.UUID)


def pg_array(values) -> str:
    """A PostgreSQL array literal of ``values`` (scalars or None), bound as one text parameter
    and cast where it is used (``%s::varchar[]``, or ``column = ANY(%s)``, typed by its column).

    psycopg binds a list itself, but client-side binding (what PgBouncer in transaction
    pooling needs) quotes it element by element in Python: about 40 µs per array of 32, five
    times what this costs, and a claim or a group commit binds a dozen such arrays."""
    return "{" + ",".join(["NULL" if value is None else _array_element(value) for value in values]) + "}"


def _array_element(value) -> str:
    if not isinstance(value, ARRAY_ELEMENT_TYPES):  # bool is an int: str() gives True/False, which PostgreSQL reads
        raise TypeError(f"no array literal for {type(value).__name__}")
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def among(column: str, values) -> tuple[str, list]:
    """``column`` is one of ``values`` (non-empty): the condition and its parameters."""
    values = list(values)
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [pg_array(values)]
    return f"{column} IN ({', '.join(['%s'] * len(values))})", values


def checked(condition: str) -> str:
    """``condition`` as a check of rows found otherwise (by primary key), which no index can
    serve: the planner proves nothing through a CASE. Written plainly, a guard such as
    ``r.state = 'running'`` makes every partial index of running runs usable for the
    statement too, and with the statistics of a history (no live row in them, every live
    index estimated empty) the planner reads such an index whole for each row looked up,
    where the primary key finds it at once."""
    return f"(CASE WHEN {condition} THEN TRUE ELSE FALSE END)"


def checked_q(condition: Q) -> Case:
    """checked() for the ORM: a filter of ``condition`` that no index can serve."""
    return Case(When(condition, then=Value(True)), default=Value(False), output_field=BooleanField())


def row_locks(skip_locked: bool = True, of: str = "") -> str:
    """Row locks of the hot path (of the tables aliased ``of``, when given): NO KEY UPDATE
    excludes every other claim, completion and edit of the row as FOR UPDATE does, but not
    the foreign-key checks of rows inserted meanwhile (FOR KEY SHARE): a scanner
    materializing a tenant's runs, or a completion registering a run's object, never waits
    for a claim of that tenant to commit. None on SQLite, which has one writer at a time."""
    if not connection.features.has_select_for_update:
        return ""
    return f" FOR NO KEY UPDATE{f' OF {of}' if of else ''}{' SKIP LOCKED' if skip_locked else ''}"


def claimable(classes, job_types=None, alias: str = "r") -> tuple[str, list]:
    """Queued runs due now in ``classes``, of ``job_types`` when given: a condition on ``alias``."""
    in_classes, params = among(f"{alias}.resource_class", classes)
    sql = f"{alias}.state = %s AND {alias}.due_at <= {now_sql()} AND {in_classes}"
    params = [RunState.QUEUED, *params]
    if job_types is not None:
        in_types, type_params = among(f"{alias}.job_type", job_types) if job_types else ("1 = 0", [])
        sql, params = f"{sql} AND {in_types}", params + type_params
    return sql, params


def claimable_exists(classes, job_types=None) -> bool:
    condition, params = claimable(classes, job_types)
    return bool(_rows(f"SELECT 1 FROM {RUN} AS r WHERE {condition} LIMIT 1", params))


def running_count(tenant: str = "t") -> str:
    """A tenant's running runs, as a column of a query over tenants aliased ``tenant``. On
    PostgreSQL the count stops at the tenant's limit, so a claim costs what the limit
    allows, not what is running. Exact only for a tenant this transaction has locked, and
    only in a statement after the lock: the locking statement's own snapshot predates its wait."""
    running = f"SELECT 1 FROM {RUN} AS rc WHERE rc.tenant_id = {tenant}.id AND rc.state = '{RunState.RUNNING}'"
    if connection.vendor == "postgresql":
        return f"(SELECT count(*) FROM ({running} LIMIT {tenant}.max_active_runs) AS capped)"
    return f"(SELECT count(*) FROM ({running}) AS counted)"  # SQLite cannot LIMIT by an outer column


def live_slots(resource_class: str) -> tuple[str, list]:
    """A column: the class's slots reported by live worker processes."""
    return f"COALESCE((SELECT sum(slots) FROM {SLOTS} WHERE resource_class = %s AND expires_at > {now_sql()}), 0)", [
        resource_class
    ]


def running_ordinary(resource_class: str) -> tuple[str, list]:
    """A column: the class's running runs without a start promise."""
    return (
        f"(SELECT count(*) FROM {RUN} AS ro WHERE ro.state = '{RunState.RUNNING}' AND NOT ro.strict"
        f" AND ro.resource_class = %s)"
    ), [resource_class]


def tenant_loads(classes, job_types, extra: list[tuple[str, list]]) -> list[tuple]:
    """Tenants with claimable work: (id, weight, max active runs, due instant and strictness
    of their first run in claim order, running count, whether it uses concurrency keys,
    *``extra`` columns)."""
    condition, params = claimable(classes, job_types)
    def first(column):
        return f"(SELECT r.{column} FROM {RUN} AS r WHERE r.tenant_id = t.id AND {condition}" \
               f" ORDER BY r.strict DESC, r.due_at LIMIT 1)"

    columns = "".join(f", {sql}" for sql, _ in extra)
    sql = (
        f"SELECT * FROM (SELECT t.id, t.weight, t.max_active_runs, {first('due_at')} AS oldest,"
        f" {first('strict')} AS urgent, {running_count()} AS running, t.uses_concurrency_keys{columns}"
        f" FROM {TENANT} AS t) AS loads"
        f" WHERE oldest IS NOT NULL"
    )
    return _rows(sql, [*params, *params, *(p for _, extra_params in extra for p in extra_params)])


def lock_tenants(ids: list[str], *, skip_locked: bool) -> set[str]:
    """Lock these tenants' rows in id order; the ids actually locked."""
    if not ids:
        return set()
    condition, params = among("id", ids)
    return {row[0] for row in _rows(f"SELECT id FROM {TENANT} WHERE {condition} ORDER BY id{row_locks(skip_locked)}",
                                    params)}


def recount(ids, extra: list[tuple[str, list]]) -> list[tuple]:
    """(id, running count, *``extra`` columns) of these tenants, read now."""
    if not ids:
        return []
    condition, params = among("t.id", ids)
    columns = "".join(f", {sql}" for sql, _ in extra)
    extra_params = [p for _, extra_params in extra for p in extra_params]
    return _rows(f"SELECT t.id, {running_count()}{columns} FROM {TENANT} AS t WHERE {condition}",
                 [*extra_params, *params])


def key_rooms(tenant_id: str) -> dict[str, int]:
    """{concurrency key: attempts that may still start} for the tenant's keys with attempts
    running: the key's limit (DEFAULT_CONCURRENCY_LIMIT without one) less those running, a run
    counting under its schedule's key. Exact only under the tenant's lock, as running_count."""
    sql = (
        f"SELECT s.concurrency_key, COALESCE(MAX(l.max_running), {DEFAULT_CONCURRENCY_LIMIT}) - count(*)"
        f" FROM {RUN} AS r JOIN {SCHEDULE} AS s ON s.id = r.schedule_id"
        f" LEFT JOIN {CONCURRENCY_LIMIT} AS l ON l.tenant_id = r.tenant_id AND l.key = s.concurrency_key"
        f" WHERE r.tenant_id = %s AND r.state = '{RunState.RUNNING}' AND s.concurrency_key <> ''"
        f" GROUP BY s.concurrency_key"
    )
    return dict(_rows(sql, [tenant_id]))


def key_limits(tenant_id: str, keys) -> dict[str, int]:
    """{key: its limit} for those of the tenant's ``keys`` (non-empty) with one set."""
    condition, params = among("key", keys)
    return dict(_rows(f"SELECT key, max_running FROM {CONCURRENCY_LIMIT} WHERE tenant_id = %s AND {condition}",
                      [tenant_id, *params]))


def lock_candidates(tenant_id: str, classes, job_types, closed: list[str], limit: int,
                    full_keys: list[str] = ()) -> list[Run]:
    """Lock up to ``limit`` of the tenant's claimable runs, strict ones first, then by due
    instant, skipping locked ones; ordinary runs of the ``closed`` classes are left, and so
    are runs of schedules whose concurrency key is one of ``full_keys``."""
    condition, params = claimable(classes, job_types)
    if closed:
        in_closed, closed_params = among("r.resource_class", closed)
        condition, params = f"{condition} AND (r.strict OR NOT {in_closed})", params + closed_params
    if full_keys:
        in_full, full_params = among("s.concurrency_key", full_keys)
        condition = f"{condition} AND NOT EXISTS (SELECT 1 FROM {SCHEDULE} AS s WHERE s.id = r.schedule_id AND {in_full})"
        params = params + full_params
    sql = (
        f"SELECT r.* FROM {RUN} AS r WHERE r.tenant_id = %s AND {condition}"
        f" ORDER BY r.strict DESC, r.due_at, r.id LIMIT %s{row_locks()}"
    )
    return list(Run.objects.raw(sql, [tenant_id, *params, limit]))


def lock_schedules_of(ids) -> dict[str, Schedule]:
    """Lock these schedules, skipping locked ones. Loaded: what a claim decides and a worker
    reads (overlap policy, guard, concurrency key, rule); the other fields load when asked for."""
    condition, params = among("id", sorted(ids))
    sql = (f"SELECT id, overlap_policy, active_run_id, concurrency_key, recurrence FROM {SCHEDULE}"
           f" WHERE {condition}{row_locks()}")
    return {s.id: s for s in Schedule.objects.raw(sql, params)}


def insert_attempts(attempts: list[Attempt]) -> None:
    """Insert new attempts, every column given, in one statement. psycopg adapts the values
    as they are; SQLite takes them as Django prepares them."""
    if not attempts:
        return
    columns = ", ".join(f'"{f.column}"' for f in ATTEMPT_FIELDS)
    row = f"({', '.join(['%s'] * len(ATTEMPT_FIELDS))})"
    if connection.vendor == "postgresql":
        params = [getattr(a, f.attname) for a in attempts for f in ATTEMPT_FIELDS]
    else:
        params = [f.get_db_prep_save(getattr(a, f.attname), connection) for a in attempts for f in ATTEMPT_FIELDS]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {ATTEMPT} ({columns}) VALUES {', '.join([row] * len(attempts))}", params)


def mark_dispatched(run_ids: list[str]) -> None:
    """The dispatch intents of these claimed runs are served: their hints are spent."""
    if connection.vendor != "postgresql":
        condition, params = among("run_id", run_ids)
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {OUTBOX} SET processed_at = {now_sql()}"
                           f" WHERE {condition} AND kind = %s AND processed_at IS NULL", [*params, OutboxKind.DISPATCH])
        return
    # Each run's intents looked up through the run_id index, one lookup per run (OFFSET 0 keeps
    # the lookup per run). As one `run_id = ANY(...)` condition, a planner with no statistics
    # of the outbox (a new database's first wave, before autovacuum analyzed it) counts 0.5 %
    # of the table per id and, for a claim's few dozen ids, reads the whole table instead.
    # The rows found are locked in id order, as every multi-row writer of the outbox locks them
    # (runs.authority.sql.in_id_order says why), not in the claim's order of runs; never
    # skipped: an intent left unprocessed would stay in the unprocessed index for good.
    sql = (
        f"UPDATE {OUTBOX} SET processed_at = {now_sql()} WHERE id = ANY(ARRAY("
        f" SELECT o.id FROM unnest(%s::varchar[]) AS c(run_id) CROSS JOIN LATERAL ("
        f"  SELECT id FROM {OUTBOX} WHERE run_id = c.run_id AND kind = %s AND processed_at IS NULL OFFSET 0"
        f" ) AS f JOIN {OUTBOX} AS o ON o.id = f.id ORDER BY o.id{row_locks(False, of='o')}))"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [pg_array(run_ids), OutboxKind.DISPATCH])


def _rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
