"""Statements that lock schedules: a scanner's due schedules (by bucket or among its timers),
a wave's re-lock of what it planned, and a group of completions' schedules. Schedules come
second in the lock order (tenant, schedule, run, object: runs/authority/locks.py)."""

from django.db.models import Q

from runs.authority.statements import dialect
from runs.authority.statements.dialect import pg_array, row_locks
from runs.models import Run
from schedules.models import Schedule


def schedules_lock_due(fields, buckets: list[int], now, limit: int, exclude: list[str] = ()) -> list[tuple]:
    """Lock up to ``limit`` unpaused, undeleted schedules due at ``now`` in ``buckets``,
    skipping locked ones and the ids in ``exclude``; rows of ``fields`` (JSON fields as
    text on PostgreSQL). The caller holds no run lock (schedules come before runs).

    The due index is (bucket, next_run_at, id). On PostgreSQL a LATERAL join reads each
    bucket in index order under its own LIMIT, so a batch costs what it returns, never a
    sort of everything due; buckets are read in the order given.
    """
    if not dialect.postgresql():
        return _due_rows(fields, Q(bucket__in=buckets), now, limit, exclude)
    columns = ", ".join(f'due."{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM unnest(%s::smallint[]) AS b(bucket) CROSS JOIN LATERAL ("
        f"  SELECT * FROM {Schedule._meta.db_table} AS s"
        f"  WHERE s.bucket = b.bucket AND s.next_run_at <= %s AND NOT s.paused AND s.deleted_at IS NULL"
        f"  AND s.id <> ALL(%s::text[])"
        f"  ORDER BY s.next_run_at, s.id LIMIT %s FOR UPDATE SKIP LOCKED"
        f") AS due LIMIT %s"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [buckets, now, list(exclude), limit, limit])
        return cursor.fetchall()


def schedules_lock_due_among(fields, ids: list[str], now, limit: int, exclude: list[str] = ()) -> list[tuple]:
    """schedules_lock_due for the schedules among ``ids`` (a scanner's timers): found by
    primary key, no search of the due index; the rows are read under the lock, so what is
    materialized is the schedule as it is now, whatever the timer was loaded from. The
    caller holds no run lock."""
    if not dialect.postgresql():
        return _due_rows(fields, Q(id__in=ids), now, limit, exclude)
    columns = ", ".join(f'"{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM {Schedule._meta.db_table}"
        f" WHERE id = ANY(%s) AND next_run_at <= %s AND NOT paused AND deleted_at IS NULL AND id <> ALL(%s)"
        f" ORDER BY next_run_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [list(ids), now, list(exclude), limit])
        return cursor.fetchall()


def _due_rows(fields, among: Q, now, limit: int, exclude) -> list[tuple]:
    """The SQLite form of both: its one writer needs no row locks, so a plain read."""
    due = Schedule.objects.filter(among, next_run_at__lte=now, paused=False, deleted_at__isnull=True)
    return list(due.exclude(id__in=exclude).order_by("next_run_at").values_list(*fields)[:limit])


def schedules_lock_live(fields, ids: list[str]) -> list[tuple]:
    """Lock the unpaused, undeleted schedules among ``ids``, skipping locked ones; rows of
    ``fields`` as schedules_lock_due returns them. The caller compares them with what it
    read, and holds no run lock."""
    if not dialect.postgresql():
        live = Schedule.objects.select_for_update(skip_locked=True).filter(
            id__in=ids, paused=False, deleted_at__isnull=True
        )
        return list(live.values_list(*fields))
    columns = ", ".join(f'"{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM {Schedule._meta.db_table}"
        f" WHERE id = ANY(%s) AND NOT paused AND deleted_at IS NULL FOR UPDATE SKIP LOCKED"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [ids])
        return cursor.fetchall()


def schedules_lock_of_runs(run_ids: list[str]) -> None:
    """Lock the schedules of these runs in id order: a group of completions takes its
    schedule locks before any run lock, as every single operation does. The caller holds
    no run lock yet. Nothing to do on SQLite, whose transactions hold the one write lock."""
    if not dialect.locks_rows():
        return
    sql = (
        f"SELECT id FROM {Schedule._meta.db_table} WHERE id IN"
        f" (SELECT schedule_id FROM {Run._meta.db_table} WHERE id = ANY(%s)) ORDER BY id{row_locks(skip_locked=False)}"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [pg_array(run_ids)])
