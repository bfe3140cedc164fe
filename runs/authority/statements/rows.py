"""Statements on rows of any table: the guarded transition of one loaded row or of many, and
the write back of many loaded rows by primary key. The caller holds the lock of every row it
writes (runs/authority/locks.py: tenant, schedule, run, object)."""

from functools import reduce
from operator import or_

from django.db import connection
from django.db.models import Q

from runs.authority.statements import dialect
from runs.authority.statements.dialect import checked_q, pg_array


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
    by its primary key only: ``expected`` is checked on it (checked_q says why). The caller
    holds the row's lock (and those above it in the lock order)."""
    model = type(obj)
    if not model.objects.filter(checked_q(Q(**expected)), pk=obj.pk).update(**changes):
        raise TransitionConflict(f"{model.__name__} {obj.pk} is not in the expected state {expected}")
    for name, value in changes.items():
        setattr(obj, name, value)


def transition_each(model, objs, guard: str, **changes) -> None:
    """transition() of many loaded rows of ``model`` in one statement: ``UPDATE ... SET
    changes WHERE pk among them AND`` each row's ``guard`` column still holds the value loaded
    on it, then the same values on every row. TransitionConflict (the caller's transaction
    rolls back) unless every row matched. The caller holds the rows' locks (and those above
    them in the lock order)."""
    if not objs:
        return
    loaded: dict = {}
    for obj in objs:
        loaded.setdefault(getattr(obj, guard), []).append(obj.pk)
    expected = reduce(or_, (Q(pk__in=pks, **{guard: value}) for value, pks in loaded.items()))
    if model.objects.filter(checked_q(expected), pk__in=[obj.pk for obj in objs]).update(**changes) != len(objs):
        raise TransitionConflict(f"{model.__name__} rows are not all in their loaded {guard}")
    for obj in objs:
        for name, value in changes.items():
            setattr(obj, name, value)


def bulk_set(model, objs, fields: list[str]) -> None:
    """Write ``fields`` of already-loaded rows of ``model`` back, keyed by primary key. The
    rows are model instances or any objects with the same attributes. The caller holds the
    rows' locks (it loaded them under them).

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
    if not dialect.postgresql():
        # An ORM update per row compiled its query every time: a quarter of the embedded
        # dispatcher's CPU in a burst.
        assignments = ", ".join(f'"{f.column}" = %s' for f in columns[1:])
        with dialect.cursor() as cursor:
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
    with dialect.cursor() as cursor:
        cursor.execute(sql, [*arrays, arrays[0]])
