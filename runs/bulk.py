"""Set-based writes for the hot paths (materialize, claim): one statement per batch."""

import json

from django.db import connection
from django.utils import timezone


def bulk_set(model, objs, fields: list[str]) -> None:
    """Write ``fields`` of already-loaded rows of ``model`` back, keyed by primary key. The
    rows are model instances or any objects with the same attributes.

    On PostgreSQL this is one ``UPDATE ... FROM unnest(array, ...)``: one parameter per
    column, however many rows. Django's bulk_update builds a CASE expression per field and
    row, and a VALUES list binds a parameter per cell; both cost more than the write itself.
    The extra ``pk = ANY(...)`` lets the planner find the rows by index; joined only to the
    unnest it prefers to hash the whole table, a scan per batch.
    """
    if not objs:
        return
    meta = model._meta
    columns = [meta.pk] + [meta.get_field(name) for name in fields]
    if connection.vendor != "postgresql":
        for obj in objs:  # the embedded SQLite: small batches, one statement per row
            model.objects.filter(pk=getattr(obj, meta.pk.attname)).update(
                **{f.attname: getattr(obj, f.attname) for f in columns[1:]}
            )
        return
    arrays = [[f.get_db_prep_save(getattr(obj, f.attname), connection) for obj in objs] for f in columns]
    unnest = ", ".join(f"%s::{f.db_type(connection)}[]" for f in columns)
    names = ", ".join(f'"{f.column}"' for f in columns)
    assignments = ", ".join(f'"{f.column}" = v."{f.column}"' for f in columns[1:])
    sql = (
        f'UPDATE "{meta.db_table}" AS t SET {assignments} FROM unnest({unnest}) AS v({names}) '
        f'WHERE t."{meta.pk.column}" = v."{meta.pk.column}" AND t."{meta.pk.column}" = ANY(%s)'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*arrays, arrays[0]])


def bulk_insert(model, rows: list[dict]) -> None:
    """Insert new rows given as ``{attname: value}`` dicts; model defaults fill the rest.

    On PostgreSQL this streams them with COPY, skipping model instantiation entirely: the
    09:00 wave writes tens of thousands of occurrences and outbox rows per second. Rows of a
    wave share their payload objects; each distinct object is encoded once.
    """
    if not rows:
        return
    meta = model._meta
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**row) for row in rows], batch_size=1000)
        return

    fields = [f for f in meta.concrete_fields if not (f.primary_key and f.get_internal_type() == "BigAutoField")]
    now = timezone.now()
    # Per column: (attname, default, fresh) where a fresh default is called for every row
    # (e.g. a new id) and any other is shared.
    defaults = []
    for f in fields:
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            defaults.append((f.attname, now, False))
        elif f.has_default() and callable(f.default):
            defaults.append((f.attname, f.default, True))
        else:
            defaults.append((f.attname, f.get_default(), False))
    json_positions = [i for i, f in enumerate(fields) if f.get_internal_type() == "JSONField"]
    encoded: dict[int, tuple] = {}  # id() of a JSON value -> (the value, kept alive; its text)

    def as_json(value):
        known = encoded.get(id(value))
        if known is None:
            known = encoded[id(value)] = (value, json.dumps(value))
        return known[1]

    columns = ", ".join(f'"{f.column}"' for f in fields)
    # Raw COPY bypasses Django's error translation: keep IntegrityError and friends Django's.
    with connection.cursor() as wrapper, connection.wrap_database_errors:
        # Text COPY: the server parses every value, JSON text included, by its column type.
        with wrapper.cursor.copy(f'COPY "{meta.db_table}" ({columns}) FROM STDIN') as copy:
            for row in rows:
                values = [
                    row[name] if name in row else (default() if fresh else default)
                    for name, default, fresh in defaults
                ]
                for i in json_positions:
                    if values[i] is not None:
                        values[i] = as_json(values[i])
                copy.write_row(values)
