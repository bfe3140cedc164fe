"""The authority's statements: every write of the hot path and every query with a vendor
branch, one named function each (like procrastinate's queries file).

PostgreSQL is the production authority; the embedded SQLite takes the plain ORM branch of
most functions. The hot path's writes (register and record uploads, lock and publish
completions) are one SQL text for both: their input rows come from ``input_rows``, one array
per column on PostgreSQL and a VALUES list on SQLite, which takes no row locks (it has one
writer at a time). Callers hold the locks each statement's docstring names.
"""

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, F, Func, Q, Subquery
from django.db.models.expressions import RawSQL

from runs.authority.claim_sql import among, checked, checked_q, clock_sql, pg_array, row_locks
from runs.authority.owner import leased_sql, owns_sql
from runs.models import (Attempt, AttemptState, ObjectState, Outbox, OutboxKind, Run, RunState, StoredObject,
                         TenantStorage)
from schedules.models import Schedule, Tenant


class TransitionConflict(RuntimeError):
    """A guarded transition found its row in another state than the caller locked it in.

    Never a client error: it means a lock was not taken or a state check is missing, so
    the transaction is rolled back loudly instead of overwriting someone else's change.
    """


def transition(obj, expected: dict, **changes) -> None:
    """Write ``changes`` to a loaded row, guarded: ``UPDATE ... SET changes WHERE pk AND
    expected``, then the same values on ``obj``. ``expected`` holds ORM lookups
    (``{"state": "running"}``, ``{"state__in": [...]}``); only the named columns are
    written. TransitionConflict when the row is not in the expected state. The row is found
    by its primary key only: ``expected`` is checked on it (checked_q says why)."""
    model = type(obj)
    if not model.objects.filter(checked_q(Q(**expected)), pk=obj.pk).update(**changes):
        raise TransitionConflict(f"{model.__name__} {obj.pk} is not in the expected state {expected}")
    for name, value in changes.items():
        setattr(obj, name, value)


def input_rows(name: str, columns: list[tuple[str, str]], rows: list[tuple]) -> tuple[str, list]:
    """A common table expression ``name`` of ``rows`` (non-empty; tuples in the order of
    ``columns``, each ``(name, PostgreSQL type)``) and its parameters: on PostgreSQL one
    array per column (``unnest``), however many rows; on SQLite a VALUES list."""
    names = ", ".join(column for column, _ in columns)
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%s::{db_type}[]" for _, db_type in columns)
        return f"{name}({names}) AS (SELECT * FROM unnest({arrays}))", [pg_array(values) for values in zip(*rows)]
    row = f"({', '.join(['%s'] * len(columns))})"
    return f"{name}({names}) AS (VALUES {', '.join([row] * len(rows))})", [value for r in rows for value in r]


def read_time(value):
    """An instant read by a raw statement, aware: PostgreSQL answers it so; SQLite answers UTC
    text (or a naive datetime), converted as Django converts its datetime columns."""
    if connection.vendor == "postgresql":
        return value
    return connection.ops.convert_datetimefield_value(value, None, connection)


def lock_due_schedules(fields, buckets: list[int], now, limit: int, exclude: list[str] = ()) -> list[tuple]:
    """Lock up to ``limit`` unpaused, undeleted schedules due at ``now`` in ``buckets``,
    skipping locked ones and the ids in ``exclude``; rows of ``fields`` (JSON fields as
    text on PostgreSQL).

    The due index is (bucket, next_run_at, id). On PostgreSQL a LATERAL join reads each
    bucket in index order under its own LIMIT, so a batch costs what it returns, never a
    sort of everything due; buckets are read in the order given.
    """
    if connection.vendor != "postgresql":
        due = Schedule.objects.filter(next_run_at__lte=now, bucket__in=buckets, paused=False, deleted_at__isnull=True)
        return list(due.exclude(id__in=exclude).order_by("next_run_at").values_list(*fields)[:limit])
    columns = ", ".join(f'due."{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM unnest(%s::smallint[]) AS b(bucket) CROSS JOIN LATERAL ("
        f"  SELECT * FROM {Schedule._meta.db_table} AS s"
        f"  WHERE s.bucket = b.bucket AND s.next_run_at <= %s AND NOT s.paused AND s.deleted_at IS NULL"
        f"  AND s.id <> ALL(%s::text[])"
        f"  ORDER BY s.next_run_at, s.id LIMIT %s FOR UPDATE SKIP LOCKED"
        f") AS due LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [buckets, now, list(exclude), limit, limit])
        return cursor.fetchall()


def lock_due_among(fields, ids: list[str], now, limit: int, exclude: list[str] = ()) -> list[tuple]:
    """lock_due_schedules for the schedules among ``ids`` (a scanner's timers): found by
    primary key, no search of the due index; the rows are read under the lock, so what is
    materialized is the schedule as it is now, whatever the timer was loaded from."""
    if connection.vendor != "postgresql":
        due = Schedule.objects.filter(id__in=ids, next_run_at__lte=now, paused=False, deleted_at__isnull=True)
        return list(due.exclude(id__in=exclude).order_by("next_run_at").values_list(*fields)[:limit])
    columns = ", ".join(f'"{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM {Schedule._meta.db_table}"
        f" WHERE id = ANY(%s) AND next_run_at <= %s AND NOT paused AND deleted_at IS NULL AND id <> ALL(%s)"
        f" ORDER BY next_run_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(ids), now, list(exclude), limit])
        return cursor.fetchall()


OUTBOX_CHANNEL = "scheduler_outbox"


def notify_outbox() -> None:
    """Wake the relays listening on OUTBOX_CHANNEL when this transaction commits (one
    notification per transaction, however many intents; none if it rolls back). Only a
    wake-up: relays poll the outbox all the same."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [OUTBOX_CHANNEL])


def extend_leases_if_owned(held: list[tuple[str, int]]) -> dict[str, bool]:
    """Extend, in one statement, the lease of every ``(attempt id, fence)`` in ``held`` whose
    attempt still owns its run (owner.owns_sql: a passed lease is not revived), each by
    its own lease length from database time, never past its deadline by more than the
    timeout grace (transitions.lease_until; LEAST ignores a null deadline). Returns
    ``{attempt id: cancellation requested}`` for those; an attempt missing from the answer
    has lost its run. PostgreSQL only: the embedded SQLite extends one lease at a time
    (ownership.heartbeat_many)."""
    run_table, attempt_table = Run._meta.db_table, Attempt._meta.db_table
    sql = (
        f"WITH extended AS ("
        f"  UPDATE {run_table} AS r"
        f"  SET lease_expires_at = LEAST(clock_timestamp() + a.lease_seconds * interval '1 second',"
        f"   a.deadline_at + %s * interval '1 second')"
        f"  FROM unnest(%s::varchar[], %s::bigint[]) AS h(attempt_id, fence), {attempt_table} AS a"
        f"  WHERE a.id = h.attempt_id AND r.id = a.run_id AND {owns_sql('r', 'h.fence', attempt='a')}"
        f"  RETURNING a.id AS attempt_id, r.lease_expires_at, r.cancellation_requested"
        f") UPDATE {attempt_table} AS a SET lease_expires_at = e.lease_expires_at"
        f" FROM extended AS e WHERE a.id = e.attempt_id"
        f" RETURNING a.id, e.cancellation_requested"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS, pg_array(a for a, _ in held),
                             pg_array(f for _, f in held)])
        return dict(cursor.fetchall())


def register_uploads_if_owned(items) -> dict[str, tuple]:
    """Register uploads before they begin, in one statement: lock each item's run (in id
    order), check that its attempt owns it (owner.owns_sql) and that its tenant's results
    hold less than its max_stored_bytes, insert the staged registry row. ``items`` have
    ``key, run_id, attempt_id, fence, content_type, worker_token_id``. Returns ``{key: (id,
    created_at)}`` for the rows inserted; a key missing from the answer (no such run or
    attempt, ownership lost, key registered already, ``worker_token_id`` not the credential
    that claimed, or the tenant's storage full) takes the caller's general path, which tells
    these apart."""
    if not items:
        return {}
    columns = [("key", "varchar"), ("run_id", "varchar"), ("attempt_id", "varchar"), ("fence", "bigint"),
               ("content_type", "varchar"), ("worker_token_id", "varchar")]
    uploads, params = input_rows("u", columns, [tuple(getattr(item, name) for name, _ in columns) for item in items])
    runs, run_params = among("r.id", [item.run_id for item in items])  # by index (bulk_set says why)
    attempts, attempt_params = among("a.id", [item.attempt_id for item in items])
    sql = (
        f"WITH {uploads}"
        f" INSERT INTO {StoredObject._meta.db_table} (key, run_id, attempt_id, fence, state, content_type, created_at)"
        f" SELECT u.key, r.id, a.id, a.fence, 'staged', u.content_type, {clock_sql()}"
        f" FROM u JOIN {Run._meta.db_table} AS r ON r.id = u.run_id"
        f" JOIN {Attempt._meta.db_table} AS a ON a.run_id = r.id AND a.id = u.attempt_id"
        f" JOIN {Tenant._meta.db_table} AS t ON t.id = r.tenant_id"
        f" LEFT JOIN {TenantStorage._meta.db_table} AS s ON s.tenant_id = r.tenant_id"
        f" WHERE {runs} AND {attempts} AND {owns_sql('r', 'u.fence', attempt='a')}"
        f"   AND (u.worker_token_id IS NULL OR a.worker_token_id = u.worker_token_id)"
        f"   AND COALESCE(s.stored_bytes, 0) < t.max_stored_bytes"
        f" ORDER BY r.id{row_locks(skip_locked=False, of='r')}"
        f" ON CONFLICT (key) DO NOTHING RETURNING key, id, created_at"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *run_params, *attempt_params])
        return {key: (object_id, read_time(created_at)) for key, object_id, created_at in cursor.fetchall()}


def record_uploads(objs) -> set:
    """Record the written version of staged objects (``id, version_id, checksum, size,
    content_type, filename`` each), in one statement, each only while its row is still
    staged without a version: cleanup may have taken it during the upload. Returns the ids
    recorded."""
    if not objs:
        return set()
    fields = ["version_id", "checksum", "size", "content_type", "filename"]
    columns = [("object_id", "bigint"), *zip(fields, ["varchar", "varchar", "bigint", "varchar", "varchar"])]
    versions, params = input_rows("v", columns, [(o.id, *(getattr(o, name) for name in fields)) for o in objs])
    # The extra condition on o.id lets the planner find the rows by index (bulk_set says why).
    known, known_params = among("o.id", [o.id for o in objs])
    table, unrecorded = StoredObject._meta.db_table, checked("o.state = 'staged' AND o.version_id IS NULL")
    sql = (
        f"WITH {versions}"
        f" UPDATE {table} AS o SET version_id = v.version_id, checksum = v.checksum, size = v.size,"
        f" content_type = v.content_type, filename = v.filename, uploaded_at = {clock_sql()}"
        f" FROM v WHERE o.id = v.object_id AND {known} AND {unrecorded}"
        f" RETURNING id"  # SQLite's RETURNING names the written table's columns unqualified
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *known_params])
        return {row[0] for row in cursor.fetchall()}


def lock_schedules_of_runs(run_ids: list[str]) -> None:
    """Lock the schedules of these runs in id order: a group of completions takes its
    schedule locks before any run lock, as every single operation does. Nothing to do on
    SQLite, whose transactions hold the one write lock."""
    if not connection.features.has_select_for_update:
        return
    sql = (
        f"SELECT id FROM {Schedule._meta.db_table} WHERE id IN"
        f" (SELECT schedule_id FROM {Run._meta.db_table} WHERE id = ANY(%s)) ORDER BY id{row_locks(skip_locked=False)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [pg_array(run_ids)])


# What lock_completions reads per completion, in this order.
COMPLETION_FIELDS = (
    "run_id", "run_state", "run_fence", "current_attempt_id", "leased", "holds_guard", "overlap_policy",
    "recurrence_kind", "effects", "resource_class", "attempt_state", "attempt_fence", "attempt_started_at",
    "object_id", "object_state", "object_attempt_id", "object_fence", "object_version_id", "object_checksum",
    "object_size", "object_content_type", "now",
)


def lock_completions(run_ids: list[str], attempt_ids: list[str], keys: list[str]) -> list[tuple]:
    """Lock, in run id order, each completion's run and staged object, and read what the
    fenced completion checks (COMPLETION_FIELDS, ``effects`` as JSON text, instants aware),
    with database time. A completion whose run, attempt or object does not exist is missing
    from the answer. The caller holds the schedule locks (lock_schedules_of_runs)."""
    completions, params = input_rows(
        "c", [("run_id", "varchar"), ("attempt_id", "varchar"), ("key", "varchar")],
        list(zip(run_ids, attempt_ids, keys)))
    runs, run_params = among("r.id", run_ids)  # by index (bulk_set says why)
    attempts, attempt_params = among("a.id", attempt_ids)
    if connection.vendor == "postgresql":
        kind, effects = "s.recurrence ->> 'kind'", "(r.payload -> 'effects')::text"
    else:
        kind, effects = "json_extract(s.recurrence, '$.kind')", "json_extract(r.payload, '$.effects')"
    sql = (
        f"WITH {completions}"
        f" SELECT r.id, r.state, r.fence, r.current_attempt_id, {leased_sql('r')},"
        f"  r.holds_guard, s.overlap_policy, {kind}, {effects}, r.resource_class,"
        f"  a.state, a.fence, a.started_at,"
        f"  o.id, o.state, o.attempt_id, o.fence, o.version_id, o.checksum, o.size, o.content_type,"
        f"  {clock_sql()}"
        f" FROM c JOIN {Run._meta.db_table} AS r ON r.id = c.run_id"
        f" JOIN {Schedule._meta.db_table} AS s ON s.id = r.schedule_id"
        f" JOIN {Attempt._meta.db_table} AS a ON a.id = c.attempt_id AND a.run_id = r.id"
        f" JOIN {StoredObject._meta.db_table} AS o ON o.key = c.key"
        f" WHERE {runs} AND {attempts}"
        f" ORDER BY r.id{row_locks(skip_locked=False, of='r, o')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *run_params, *attempt_params])
        rows = cursor.fetchall()
    if connection.vendor == "postgresql":
        return rows
    started, now = COMPLETION_FIELDS.index("attempt_started_at"), COMPLETION_FIELDS.index("now")
    rows = [list(row) for row in rows]
    for row in rows:
        row[started], row[now] = read_time(row[started]), read_time(row[now])
    return rows


def publish_results(rows: list[tuple], now) -> tuple[int, int, int]:
    """The canonical publication of several succeeded attempts: each ``(run id, attempt id,
    object id, key, version id, checksum, size, content type)`` marks its object referenced,
    its attempt succeeded and its run succeeded with the result pointer, each write guarded
    by the state the caller locked and checked. One statement on PostgreSQL, three on SQLite
    (which has no writing WITH). Returns the rows written per table (objects, attempts, runs)."""
    published, params = input_rows(
        "p", [("run_id", "varchar"), ("attempt_id", "varchar"), ("object_id", "bigint"), ("key", "varchar"),
              ("version_id", "varchar"), ("checksum", "varchar"), ("size", "bigint"), ("content_type", "varchar")],
        rows)
    active = ", ".join(f"'{state}'" for state in (RunState.PENDING, RunState.QUEUED, RunState.RUNNING))
    # Each row found by its id, its state checked on it (checked() says why).
    staged, running = checked(f"o.state = '{ObjectState.STAGED}'"), checked(f"a.state = '{AttemptState.RUNNING}'")
    active = checked(f"r.state IN ({active})")
    # Each row also found among its ids, by index (bulk_set says why).
    objects, object_params = among("o.id", [row[2] for row in rows])
    attempts, attempt_params = among("a.id", [row[1] for row in rows])
    runs, run_params = among("r.id", [row[0] for row in rows])
    updates = [
        (f"UPDATE {StoredObject._meta.db_table} AS o SET state = 'referenced', referenced_at = %s"
         f" FROM p WHERE o.id = p.object_id AND {objects} AND {staged}", object_params),
        (f"UPDATE {Attempt._meta.db_table} AS a SET state = 'succeeded', finished_at = %s, error = '', retryable = NULL"
         f" FROM p WHERE a.id = p.attempt_id AND {attempts} AND {running}", attempt_params),
        (f"UPDATE {Run._meta.db_table} AS r SET state = 'succeeded', pending_reason = '', finished_at = %s,"
         f" holds_guard = false, accepted_attempt_id = p.attempt_id, result_key = p.key,"
         f" result_version_id = p.version_id, result_checksum = p.checksum, result_size = p.size,"
         f" result_content_type = p.content_type"
         f" FROM p WHERE r.id = p.run_id AND {runs} AND {active}", run_params),
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            writes = ", ".join(f"{alias} AS ({sql} RETURNING {alias}.id)" for alias, (sql, _) in zip("oar", updates))
            cursor.execute(
                f"WITH {published}, {writes} SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM a),"
                f" (SELECT count(*) FROM r)",
                [*params, *(p for _, extra in updates for p in [now, *extra])])
            return cursor.fetchone()
        counts, stored_now = [], connection.ops.adapt_datetimefield_value(now)  # Django's naive UTC text
        for sql, extra in updates:  # counted by RETURNING: sqlite3 has no rowcount for a WITH statement
            cursor.execute(f"WITH {published} {sql} RETURNING 1", [*params, stored_now, *extra])
            counts.append(len(cursor.fetchall()))
        return tuple(counts)


def lock_schedules(fields, ids: list[str]) -> list[tuple]:
    """Lock the unpaused, undeleted schedules among ``ids``, skipping locked ones; rows of
    ``fields`` as lock_due_schedules returns them. The caller compares them with what it read."""
    if connection.vendor != "postgresql":
        live = Schedule.objects.select_for_update(skip_locked=True).filter(
            id__in=ids, paused=False, deleted_at__isnull=True
        )
        return list(live.values_list(*fields))
    columns = ", ".join(f'"{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM {Schedule._meta.db_table}"
        f" WHERE id = ANY(%s) AND NOT paused AND deleted_at IS NULL FOR UPDATE SKIP LOCKED"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ids])
        return cursor.fetchall()


def bulk_set(model, objs, fields: list[str]) -> None:
    """Write ``fields`` of already-loaded rows of ``model`` back, keyed by primary key. The
    rows are model instances or any objects with the same attributes.

    On PostgreSQL this is one ``UPDATE ... FROM unnest(array, ...)``: one parameter per
    column, however many rows. Django's bulk_update builds a CASE expression per field and
    row, and a VALUES list binds a parameter per cell; both cost more than the write itself.
    The extra ``pk = ANY(...)`` lets the planner find the rows by index; joined only to the
    unnest it prefers to hash the whole table, a scan per batch. On SQLite it is one
    ``UPDATE`` by primary key, compiled once and run for every row (``executemany``).
    """
    if not objs:
        return
    meta = model._meta
    columns = [meta.pk] + [meta.get_field(name) for name in fields]
    values = [[f.get_db_prep_save(getattr(obj, f.attname), connection) for obj in objs] for f in columns]
    if connection.vendor != "postgresql":
        # An ORM update per row compiled its query every time: a quarter of the embedded
        # dispatcher's CPU in a burst.
        assignments = ", ".join(f'"{f.column}" = %s' for f in columns[1:])
        with connection.cursor() as cursor:
            cursor.executemany(f'UPDATE "{meta.db_table}" SET {assignments} WHERE "{meta.pk.column}" = %s',
                               list(zip(*values[1:], values[0])))
        return
    arrays = [pg_array(column) for column in values]
    unnest = ", ".join(f"%s::{f.db_type(connection)}[]" for f in columns)
    names = ", ".join(f'"{f.column}"' for f in columns)
    assignments = ", ".join(f'"{f.column}" = v."{f.column}"' for f in columns[1:])
    sql = (
        f'UPDATE "{meta.db_table}" AS t SET {assignments} FROM unnest({unnest}) AS v({names}) '
        f'WHERE t."{meta.pk.column}" = v."{meta.pk.column}" AND t."{meta.pk.column}" = ANY(%s)'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*arrays, arrays[0]])


def lease_unpublished(now, until, limit: int) -> list[tuple]:
    """Take a relay lease (``relay_until``, one more publish attempt) on up to ``limit``
    unpublished dispatch intents whose lease is free at ``now``, oldest first, skipping rows
    another relay holds; returns their ``(id, run id, resource class)`` in id order. On
    PostgreSQL one statement, the ids bound as one array."""
    due = Outbox.objects.filter(kind=OutboxKind.DISPATCH, published_at__isnull=True).filter(
        Q(relay_until__isnull=True) | Q(relay_until__lte=now))
    if connection.vendor != "postgresql":
        rows = list(due.order_by("id").select_for_update(skip_locked=True).values_list(
            "id", "run_id", "resource_class")[:limit])
        Outbox.objects.filter(id__in=[row[0] for row in rows]).update(
            relay_until=until, publish_attempts=F("publish_attempts") + 1)
        return rows
    table = Outbox._meta.db_table
    sql = (
        f"UPDATE {table} SET relay_until = %s, publish_attempts = publish_attempts + 1 WHERE id IN ("
        f" SELECT id FROM {table} WHERE kind = %s AND published_at IS NULL"
        f"  AND (relay_until IS NULL OR relay_until <= %s)"
        f" ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, run_id, resource_class"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [until, OutboxKind.DISPATCH, now, limit])
        return sorted(cursor.fetchall())


def in_id_order(rows, *, skip_locked: bool = False):
    """The rows of the queryset ``rows`` (outbox rows), for one multi-row UPDATE or DELETE that
    locks them in id order first (``id = ANY(ARRAY(SELECT id ... ORDER BY id FOR NO KEY UPDATE)))``);
    inside a transaction. Every writer of many outbox rows at once takes them in this order
    (the claim's mark_dispatched spells it in its own SQL), so two such statements wait for
    each other instead of each holding a row the other needs next: the relay marking a
    batch published and a claim marking the same intents processed deadlocked that way.
    With ``skip_locked``, rows another transaction holds are left out: for a writer whose
    change the holder makes moot. SQLite has no row locks (one writer at a time): ``rows``."""
    if not connection.features.has_select_for_update:
        return rows
    locked = rows.order_by("pk").select_for_update(no_key=True, skip_locked=skip_locked, of=("self",)).values("pk")
    # ``id = ANY(ARRAY(...))``: every row locked first, by a subplan run once, then each written
    # by primary key. Joined as ``id IN (...)``, the planner may read the whole table to match
    # them (a new database's outbox, before its first ANALYZE).
    return rows.model.objects.filter(Func(F("pk"), Subquery(locked), arg_joiner=" = ANY(ARRAY",
                                          template="%(expressions)s)", output_field=BooleanField()))


def set_outbox(ids: list[int], **changes) -> int:
    """Write ``changes`` to the outbox rows ``ids``, waiting for any claim that holds one
    (in_id_order): a claim marking a row processed does not make its publication less true.
    On PostgreSQL the ids are one array."""
    if connection.vendor != "postgresql":
        return Outbox.objects.filter(id__in=ids).update(**changes)
    rows = Outbox.objects.filter(RawSQL('"id" = ANY(%s::bigint[])', [list(ids)], output_field=BooleanField()))
    with transaction.atomic():
        return in_id_order(rows).update(**changes)
