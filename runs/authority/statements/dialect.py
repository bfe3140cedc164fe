"""The dialect boundary: everything the authority's statements spell differently on
PostgreSQL (the production authority) and on the embedded SQLite, and the only place in
runs/authority/ that asks which database it talks to.

PostgreSQL binds a list as one array parameter (``= ANY(%s)``, ``unnest``) and takes row
locks (with SKIP LOCKED where a statement says so); the embedded SQLite gets the list spelled
out and no row locks (it has one writer at a time). Times are the database's own, never this
process's clock. A statement whose whole text differs asks ``postgresql()``; every smaller
difference is one helper below.
"""

from __future__ import annotations

import datetime
import decimal
import time
import uuid
import weakref

from django.db import connection
from django.db.models import BooleanField, Case, DateTimeField, Func, Q, Value, When
from django.utils import timezone

from kernel.connections import statement_cursor


def postgresql() -> bool:
    """Whether this is the production authority (PostgreSQL), not the embedded SQLite: for a
    statement (or a path) written once per database."""
    return connection.vendor == "postgresql"


# SQLite's clock reads milliseconds, the process clock (authority_now) microseconds: the end of
# SQLite's millisecond ('%f' is SS.SSS, then 999) is at or after every instant this process
# wrote within it. Plain '%f' (Django's Now()) made a run re-queued at 12:00:01.123456 not due
# to a claim at 12:00:01.123: the string 01.123456 sorts after 01.123.
SQLITE_NOW = "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f999', 'NOW')"


def now_sql() -> str:
    """The statement's time (on SQLite, the end of its millisecond: SQLITE_NOW)."""
    return "STATEMENT_TIMESTAMP()" if postgresql() else SQLITE_NOW


def clock_sql() -> str:
    """The time as the statement reads it, after any lock wait (on SQLite the statement's:
    its transactions take the write lock when they begin)."""
    return "clock_timestamp()" if postgresql() else SQLITE_NOW


def clock_expression():
    """clock_sql() for the ORM: authority time inside the statement itself (no extra round
    trip on PostgreSQL)."""
    if postgresql():
        return Func(function="clock_timestamp", output_field=DateTimeField())
    return timezone.now()  # the embedded SQLite lives on this host: its clock is the process clock


def read_time(value):
    """An instant read by a raw statement, aware: PostgreSQL answers it so; SQLite answers UTC
    text (or a naive datetime), converted as Django converts its datetime columns."""
    if postgresql():
        return value
    return connection.ops.convert_datetimefield_value(value, None, connection)


def stored_time(value):
    """An instant as a raw statement binds it into a datetime column: as it is on PostgreSQL,
    Django's naive UTC text on SQLite."""
    return value if postgresql() else connection.ops.adapt_datetimefield_value(value)


def json_field(column: str, key: str, *, as_text: bool) -> str:
    """The member ``key`` of the JSON column ``column``: its text value (``as_text``), or the
    member itself as JSON text."""
    if postgresql():
        return f"{column} ->> '{key}'" if as_text else f"({column} -> '{key}')::text"
    return f"json_extract({column}, '$.{key}')"


def count_capped(rows_sql: str, cap: str) -> str:
    """``count(*)`` of the rows ``rows_sql`` selects, on PostgreSQL stopping at ``cap`` (an SQL
    expression, possibly an outer column) so that the count costs what the cap allows; exact
    on SQLite, which cannot LIMIT by an outer column."""
    if postgresql():
        return f"(SELECT count(*) FROM ({rows_sql} LIMIT {cap}) AS capped)"
    return f"(SELECT count(*) FROM ({rows_sql}) AS counted)"


def insert_values(fields, objs) -> list:
    """The parameters of a multi-row INSERT of ``fields`` of ``objs``, row after row: psycopg
    adapts the values as they are; SQLite takes them as Django prepares them."""
    if postgresql():
        return [getattr(obj, f.attname) for obj in objs for f in fields]
    return [f.get_db_prep_save(getattr(obj, f.attname), connection) for obj in objs for f in fields]


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
    if postgresql():
        return f"{column} = ANY(%s)", [pg_array(values)]
    return f"{column} IN ({', '.join(['%s'] * len(values))})", values


def input_rows(name: str, columns: list[tuple[str, str]], rows: list[tuple]) -> tuple[str, list]:
    """A common table expression ``name`` of ``rows`` (non-empty; tuples in the order of
    ``columns``, each ``(name, PostgreSQL type)``) and its parameters: on PostgreSQL one
    array per column (``unnest``), however many rows; on SQLite a VALUES list."""
    names = ", ".join(column for column, _ in columns)
    if postgresql():
        arrays = ", ".join(f"%s::{db_type}[]" for _, db_type in columns)
        return f"{name}({names}) AS (SELECT * FROM unnest({arrays}))", [pg_array(values) for values in zip(*rows)]
    row = f"({', '.join(['%s'] * len(columns))})"
    return f"{name}({names}) AS (VALUES {', '.join([row] * len(rows))})", [value for r in rows for value in r]


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


def locks_rows() -> bool:
    """Whether the database takes row locks (PostgreSQL); the embedded SQLite's transactions
    hold its one write lock instead."""
    return connection.features.has_select_for_update


# The catalogue's statements are prepared on a connection once the run tables hold a history
# (preparing() says why): at least this many rows each, read again after this many seconds on
# each connection.
PREPARE_FROM_ROWS = 50_000
PREPARE_RECHECK_SECONDS = 300
HISTORY_TABLES = ["runs_run", "runs_attempt", "runs_storedobject", "runs_outbox"]
_history_held: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # driver connection: (read at, held)
# The fewest rows of the tables as the planner estimates them: the density of the last ANALYZE
# or VACUUM times the table's size now (none before either; a TRUNCATE keeps reltuples as it was).
_ROWS_ESTIMATED = (
    "SELECT min(CASE WHEN relpages > 0 AND reltuples > 0 THEN reltuples / relpages"
    " * pg_relation_size(oid) / current_setting('block_size')::int ELSE 0 END)"
    " FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'"
)


def preparing() -> bool:
    """Whether the catalogue's statements are prepared on this connection now: on PostgreSQL,
    once the run tables hold a history (PREPARE_FROM_ROWS each, as the planner estimates
    them), never before.

    Prepared, a statement is parsed and planned once per connection, not once per call: on a
    2 M history planning was 264-288 µs of a burst's server CPU per run, 113-119 µs prepared.
    But after a few executions PostgreSQL may keep one generic plan for every value, until an
    ANALYZE of its tables, and a plan made while a table is a few pages reads it whole however
    much it grows (the group commit's statements ran 2-6 times longer in a new database's first
    burst; BENCHMARKS.md, "Preparing the hot path"). Over tables of a history a wave does not
    change the plans. Read outside Django's cursors, so that no statement count sees it."""
    if not postgresql():
        return False
    connection.ensure_connection()
    driver = connection.connection
    read_at, held = _history_held.get(driver, (None, False))
    if read_at is None or time.monotonic() - read_at > PREPARE_RECHECK_SECONDS:
        with connection.wrap_database_errors:
            rows = driver.execute(_ROWS_ESTIMATED, [HISTORY_TABLES], prepare=False).fetchone()[0]
        held = rows is not None and rows >= PREPARE_FROM_ROWS
        _history_held[driver] = (time.monotonic(), held)
    return held


def history_changed() -> None:
    """The next statement on this thread's connection reads again whether the tables hold a
    history (after a bulk load or an emptying, say)."""
    if postgresql() and connection.connection is not None:
        _history_held.pop(connection.connection, None)


def cursor(*, prepared: bool = True):
    """The cursor of the catalogue's statements. On PostgreSQL, once the tables hold a history
    (preparing()), their parameters are bound server-side and each statement is prepared on
    its connection at its first execution. So a statement's text must not vary with its input
    (arrays, not lists spelled out), and must spell the constants a partial index is chosen by
    (``state = 'queued'``): a generic plan knows no parameter's value, and a bound ``state``
    proves no partial index usable (on the 2 M history the claim's candidates then walked the
    tenant's whole history). ``prepared=False`` for a text that varies with its input.

    Unprepared (before there is a history, and on SQLite), Django's cursor, which binds
    client-side, as every statement of the hot path was bound when its costs on an empty
    database were measured (kernel.connections.statement_cursor)."""
    return statement_cursor(prepared=prepared and preparing())


def fetch(sql: str, params: list, *, prepared: bool = True) -> list[tuple]:
    """The rows a statement answers (``prepared``: as cursor())."""
    with cursor(prepared=prepared) as statement:
        statement.execute(sql, params)
        return statement.fetchall()


def execute(sql: str, params: list, *, prepared: bool = True) -> None:
    with cursor(prepared=prepared) as statement:
        statement.execute(sql, params)
