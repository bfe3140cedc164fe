"""The statements of a materialization wave (runs/authority/materialize.py, armed_timers.py):
reading schedules, the revisions' payloads and directives, and inserting the wave's rows.

A wave writes thousands of rows that differ in few columns and share most values (one
tenant, one payload per rule and job type). On PostgreSQL its statements therefore travel
as a handful of arrays bound server-side (binary, not SQL text: kernel.connections.server_cursor): a
column whose value every row shares is one parameter, a JSON column sends each distinct
value once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connection

from kernel.connections import server_cursor
from runs.authority.statements import dialect
from runs.models import Outbox, Run
from schedules.models import OccurrenceDirective, Schedule, ScheduleRevision


def schedules_read_live_among(fields, ids: list[str]) -> list[tuple]:
    """Rows of ``fields`` (JSON fields as text on PostgreSQL) of the unpaused, undeleted
    schedules among ``ids`` that have a next instant, read without locking them (arming: no
    lock held or taken)."""
    live = Schedule.objects.filter(paused=False, deleted_at__isnull=True, next_run_at__isnull=False)
    if not dialect.postgresql():
        return list(live.filter(id__in=ids).values_list(*fields))
    columns = ", ".join(f'"{Schedule._meta.get_field(name).column}"' for name in fields)
    sql = (
        f"SELECT {columns} FROM {Schedule._meta.db_table}"
        f" WHERE id = ANY(%b) AND NOT paused AND deleted_at IS NULL AND next_run_at IS NOT NULL"
    )
    with server_cursor() as cursor:
        cursor.execute(sql, [list(ids)])
        return cursor.fetchall()


def revisions_read_payloads(current: dict[str, int]) -> list[tuple[str, list[str]]]:
    """The payload text of each schedule's revision ``current[schedule id]``, grouped: one
    ``(text, schedule ids)`` per distinct payload. Revisions never change: no lock needed."""
    if not dialect.postgresql():
        rows = ScheduleRevision.objects.filter(schedule_id__in=current, revision__in=set(current.values()))
        groups: dict[str, list[str]] = {}
        for schedule_id, revision, payload in rows.values_list("schedule_id", "revision", "payload"):
            if current[schedule_id] == revision:
                groups.setdefault(json.dumps(payload), []).append(schedule_id)
        return list(groups.items())
    sql = (
        f"SELECT r.payload::text, array_agg(r.schedule_id) FROM {ScheduleRevision._meta.db_table} AS r"
        f" JOIN unnest(%b::varchar[], %b::int[]) AS c(id, revision)"
        f"  ON r.schedule_id = c.id AND r.revision = c.revision"
        f" GROUP BY r.payload::text"
    )
    with server_cursor() as cursor:
        cursor.execute(sql, [list(current), list(current.values())])
        return cursor.fetchall()


def directives_read_live_at(pairs: list[tuple[str, object]]) -> dict[tuple[str, object], tuple[str, str]]:
    """The live (not orphaned) directives of ``(schedule id, instant)`` pairs, ``{pair:
    (action, note)}``; on PostgreSQL one statement joining the pairs as two arrays. No lock
    taken: the locking path holds the schedules' locks; an armed wave is checked by each
    schedule's directive_seq (schedules_write_wave_if_unchanged)."""
    if not dialect.postgresql():
        wanted = set(pairs)
        rows = OccurrenceDirective.objects.filter(
            schedule_id__in={p[0] for p in pairs}, instant__in={p[1] for p in pairs}, orphaned_at__isnull=True,
        ).values_list("schedule_id", "instant", "action", "note")
        return {(s, at): (action, note) for s, at, action, note in rows if (s, at) in wanted}
    sql = (
        f"SELECT d.schedule_id, d.instant, d.action, d.note FROM {OccurrenceDirective._meta.db_table} AS d"
        f" JOIN unnest(%b::varchar[], %b::timestamptz[]) AS p(schedule_id, instant)"
        f"  ON d.schedule_id = p.schedule_id AND d.instant = p.instant"
        f" WHERE d.orphaned_at IS NULL"
    )
    with server_cursor() as cursor:
        cursor.execute(sql, [[p[0] for p in pairs], [p[1] for p in pairs]])
        return {(s, at): (action, note) for s, at, action, note in cursor.fetchall()}


def bulk_insert(model, rows: list[dict]) -> None:
    """Insert new rows given as ``{attname: value}`` dicts; model defaults fill the rest.
    On PostgreSQL one ``INSERT ... SELECT FROM unnest(arrays)`` (RowsSelect); the embedded
    SQLite takes bulk_create. The caller holds the locks of the rows' parents (a wave's
    schedules)."""
    if not rows:
        return
    if not dialect.postgresql():
        model.objects.bulk_create([model(**row) for row in rows], batch_size=1000)
        return
    select = RowsSelect.of(model, rows, alias="v")
    with server_cursor() as cursor:
        cursor.execute(f"{select.insert} {select.sql}", select.params)


def schedules_write_wave_if_unchanged(runs: list[dict], outbox: list[dict], expected: list[tuple],
                                      moves: list[tuple]) -> list[str]:
    """Write a wave read without locks, in one statement (PostgreSQL): lock, skipping locked
    ones, the schedules whose row still is what was read, ``expected`` as ``(id, revision,
    next_run_at)`` (unpaused, undeleted), move each one's next_run_at as ``moves`` says
    (``(id, next_run_at)``), and insert only those schedules' ``runs`` and the ``outbox``
    rows of the runs inserted; an instant already written (the unique ``(schedule,
    instant)`` key) is left as it is. Returns the ids of the schedules written. The caller
    holds no lock: the statement takes the schedules' own."""
    table = Schedule._meta.db_table
    run_rows = RowsSelect.of(Run, runs, alias="r", keep=("schedule_id",))
    outbox_rows = RowsSelect.of(Outbox, outbox, alias="o", keep=("run_id",))
    ids = [row[0] for row in expected]
    sql = (
        f"WITH due AS ("
        f"  SELECT s.id FROM {table} AS s JOIN unnest(%b::varchar[], %b::int[], %b::timestamptz[], %b::int[])"
        f"   AS e(id, revision, next_run_at, directive_seq) ON s.id = e.id"
        f"  WHERE s.id = ANY(%b) AND s.revision = e.revision AND s.next_run_at = e.next_run_at"
        f"   AND s.directive_seq = e.directive_seq"
        f"   AND NOT s.paused AND s.deleted_at IS NULL ORDER BY s.id FOR UPDATE OF s SKIP LOCKED),"
        f" moved AS (UPDATE {table} AS s SET next_run_at = m.next_run_at,"
        f"  occurrences_materialized = s.occurrences_materialized + m.instants"
        f"  FROM due JOIN unnest(%b::varchar[], %b::timestamptz[], %b::int[]) AS m(id, next_run_at, instants)"
        f"  ON m.id = due.id"
        f"  WHERE s.id = due.id RETURNING s.id),"
        f' inserted AS ({run_rows.insert} {run_rows.sql} WHERE r."schedule_id" IN'
        f"  (SELECT id FROM moved) ON CONFLICT (schedule_id, scheduled_at) WHERE trigger = 'schedule' DO NOTHING"
        f"  RETURNING id),"
        f' dispatched AS ({outbox_rows.insert} {outbox_rows.sql} WHERE o."run_id" IN'
        f"  (SELECT id FROM inserted) RETURNING 1)"
        f" SELECT id FROM moved"
    )
    params = [ids, [row[1] for row in expected], [row[2] for row in expected], [row[3] for row in expected], ids,
              [row[0] for row in moves], [row[1] for row in moves], [row[2] for row in moves],
              *run_rows.params, *outbox_rows.params]
    with server_cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


@dataclass
class RowsSelect:
    """``SELECT <every column> FROM unnest(<arrays>) AS alias(...)`` for rows given as
    ``{attname: value}`` dicts, model defaults filling the rest: a column with one value in
    every row is a single parameter (except those named in ``keep``, which a statement
    refers to); a JSON column's distinct values (by identity: rows of a wave share their
    payload objects) are encoded and sent once each, joined back by position."""

    insert: str  # INSERT INTO table (columns)
    sql: str
    params: list

    @classmethod
    def of(cls, model, rows: list[dict], *, alias: str, keep: tuple[str, ...] = ()) -> RowsSelect:
        fields = [f for f in model._meta.concrete_fields
                  if not (f.primary_key and f.get_internal_type() == "BigAutoField")]
        given = set(keep)
        for row in rows:
            given.update(row)
        expressions, select_params, arrays, array_params, joins, join_params = [], [], [], [], [], []
        for f in fields:
            values = _column(f, rows) if rows and (f.attname in given or _fresh(f)) else None
            db_type = f.db_type(connection)
            if f.attname in keep:
                arrays.append((f.column, db_type))
                array_params.append(values or [])
                expressions.append(f'{alias}."{f.column}"')
            elif db_type == "jsonb" and values is not None and not _same(values):
                distinct, positions = _distinct(values)
                join = f"{alias}j{len(joins)}"
                joins.append(f" LEFT JOIN unnest(%b::text[]) WITH ORDINALITY AS {join}(value, n)"
                             f' ON {join}.n = {alias}."{f.column}"')
                join_params.append(distinct)
                arrays.append((f.column, "bigint"))
                array_params.append(positions)
                expressions.append(f"{join}.value::jsonb")
            elif values is None or _same(values):
                value = values[0] if values is not None else f.get_default()
                expressions.append(f"%b::{db_type}")
                select_params.append(json.dumps(value) if db_type == "jsonb" and value is not None else value)
            else:
                arrays.append((f.column, db_type))
                array_params.append(values)
                expressions.append(f'{alias}."{f.column}"')
        if not arrays:  # one row: every column is a parameter
            arrays.append(("one", "integer"))
            array_params.append([1])
        unnest = ", ".join(f"%b::{db_type}[]" for _, db_type in arrays)
        names = ", ".join(f'"{column}"' for column, _ in arrays)
        columns = ", ".join(f'"{f.column}"' for f in fields)
        return cls(insert=f'INSERT INTO "{model._meta.db_table}" ({columns})',
                   sql=f"SELECT {', '.join(expressions)} FROM unnest({unnest}) AS {alias}({names}){''.join(joins)}",
                   params=[*select_params, *array_params, *join_params])


def _fresh(field) -> bool:
    """Whether the field's default is called anew for every row (a new id)."""
    return field.has_default() and callable(field.default)


def _column(field, rows: list[dict]) -> list:
    name = field.attname
    if _fresh(field):
        default = field.default
        return [row[name] if name in row else default() for row in rows]
    default = field.get_default()
    return [row.get(name, default) for row in rows]


def _same(values: list) -> bool:
    first = values[0]
    return all(value is first or value == first for value in values)


def _distinct(values: list) -> tuple[list, list]:
    """Each distinct JSON value (by identity) encoded once, and every row's 1-based position
    in that list (None for a NULL)."""
    encoded: dict[int, int] = {}
    distinct, positions = [], []
    for value in values:
        if value is None:
            positions.append(None)
            continue
        position = encoded.get(id(value))
        if position is None:
            distinct.append(json.dumps(value))
            position = encoded[id(value)] = len(distinct)
        positions.append(position)
    return distinct, positions
