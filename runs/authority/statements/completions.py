"""The group commit's statements: lock a group of completions and read what the fenced
completion checks, then publish the succeeded ones. Their input rows come from
dialect.input_rows, so each is one SQL text for both databases (the publication is three
on SQLite, which has no writing WITH)."""

from runs.authority.owner import leased_sql
from runs.authority.statements import dialect
from runs.authority.statements.dialect import among, checked, clock_sql, input_rows, json_field, read_time, row_locks
from runs.authority.statements.dialect import stored_time
from runs.models import Attempt, AttemptState, ObjectState, Run, RunState, StoredObject
from schedules.models import Schedule


# What completions_lock reads per completion, in this order.
COMPLETION_FIELDS = (
    "run_id", "run_state", "run_fence", "current_attempt_id", "leased", "holds_guard", "overlap_policy",
    "recurrence_kind", "effects", "resource_class", "attempt_state", "attempt_fence", "attempt_started_at",
    "object_id", "object_state", "object_attempt_id", "object_fence", "object_version_id", "object_checksum",
    "object_size", "object_content_type", "now",
)


def completions_lock(run_ids: list[str], attempt_ids: list[str], keys: list[str]) -> list[tuple]:
    """Lock, in run id order, each completion's run and staged object, and read what the
    fenced completion checks (COMPLETION_FIELDS, ``effects`` as JSON text, instants aware),
    with database time. A completion whose run, attempt or object does not exist is missing
    from the answer. The caller holds the schedule locks (schedules.schedules_lock_of_runs)."""
    completions, params = input_rows(
        "c", [("run_id", "varchar"), ("attempt_id", "varchar"), ("key", "varchar")],
        list(zip(run_ids, attempt_ids, keys)))
    runs, run_params = among("r.id", run_ids)  # by index (rows.bulk_set says why)
    attempts, attempt_params = among("a.id", attempt_ids)
    kind, effects = json_field("s.recurrence", "kind", as_text=True), json_field("r.payload", "effects", as_text=False)
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
    with dialect.cursor() as cursor:
        cursor.execute(sql, [*params, *run_params, *attempt_params])
        rows = cursor.fetchall()
    if dialect.postgresql():
        return rows
    started, now = COMPLETION_FIELDS.index("attempt_started_at"), COMPLETION_FIELDS.index("now")
    rows = [list(row) for row in rows]
    for row in rows:
        row[started], row[now] = read_time(row[started]), read_time(row[now])
    return rows


def runs_publish_if_active(rows: list[tuple], now) -> tuple[int, int, int]:
    """The canonical publication of several succeeded attempts: each ``(run id, attempt id,
    object id, key, version id, checksum, size, content type)`` marks its object referenced,
    its attempt succeeded and its run succeeded with the result pointer, each write guarded
    by the state the caller locked and checked. One statement on PostgreSQL, three on SQLite
    (which has no writing WITH). Returns the rows written per table (objects, attempts, runs).
    The caller holds the runs' and objects' locks (completions_lock)."""
    published, params = input_rows(
        "p", [("run_id", "varchar"), ("attempt_id", "varchar"), ("object_id", "bigint"), ("key", "varchar"),
              ("version_id", "varchar"), ("checksum", "varchar"), ("size", "bigint"), ("content_type", "varchar")],
        rows)
    active = ", ".join(f"'{state}'" for state in (RunState.PENDING, RunState.QUEUED, RunState.RUNNING))
    # Each row found by its id, its state checked on it (checked() says why).
    staged, running = checked(f"o.state = '{ObjectState.STAGED}'"), checked(f"a.state = '{AttemptState.RUNNING}'")
    active = checked(f"r.state IN ({active})")
    # Each row also found among its ids, by index (rows.bulk_set says why).
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
    with dialect.cursor() as cursor:
        if dialect.postgresql():
            writes = ", ".join(f"{alias} AS ({sql} RETURNING {alias}.id)" for alias, (sql, _) in zip("oar", updates))
            cursor.execute(
                f"WITH {published}, {writes} SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM a),"
                f" (SELECT count(*) FROM r)",
                [*params, *(p for _, extra in updates for p in [now, *extra])])
            return cursor.fetchone()
        counts, stored_now = [], stored_time(now)  # Django's naive UTC text
        for sql, extra in updates:  # counted by RETURNING: sqlite3 has no rowcount for a WITH statement
            cursor.execute(f"WITH {published} {sql} RETURNING 1", [*params, stored_now, *extra])
            counts.append(len(cursor.fetchall()))
        return tuple(counts)
