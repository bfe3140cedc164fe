"""Statements on the registry of stored objects: an upload registered before it begins (the
attempt must own its run) and its written version recorded after it. Objects come last in
the lock order (runs/authority/locks.py), after their run."""

from django.db import connection

from runs.authority.owner import owns_sql
from runs.authority.statements.dialect import among, checked, clock_sql, input_rows, read_time, row_locks
from runs.models import Attempt, Run, StoredObject, TenantStorage
from schedules.models import Tenant


def objects_register_if_owned(items) -> dict[str, tuple]:
    """Register uploads before they begin, in one statement: lock each item's run (in id
    order), check that its attempt owns it (owner.owns_sql) and that its tenant's results
    hold less than its max_stored_bytes, insert the staged registry row. ``items`` have
    ``key, run_id, attempt_id, fence, content_type, worker_token_id``. Returns ``{key: (id,
    created_at)}`` for the rows inserted; a key missing from the answer (no such run or
    attempt, ownership lost, key registered already, ``worker_token_id`` not the credential
    that claimed, or the tenant's storage full) takes the caller's general path, which tells
    these apart. The caller holds no lock: the statement takes the runs' own."""
    if not items:
        return {}
    columns = [("key", "varchar"), ("run_id", "varchar"), ("attempt_id", "varchar"), ("fence", "bigint"),
               ("content_type", "varchar"), ("worker_token_id", "varchar")]
    uploads, params = input_rows("u", columns, [tuple(getattr(item, name) for name, _ in columns) for item in items])
    runs, run_params = among("r.id", [item.run_id for item in items])  # by index (rows.bulk_set says why)
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


def objects_record_if_staged(objs) -> set:
    """Record the written version of staged objects (``id, version_id, checksum, size,
    content_type, filename`` each), in one statement, each only while its row is still
    staged without a version: cleanup may have taken it during the upload. Returns the ids
    recorded. The caller holds no lock (the guard decides); the statement takes the
    objects' row locks."""
    if not objs:
        return set()
    fields = ["version_id", "checksum", "size", "content_type", "filename"]
    columns = [("object_id", "bigint"), *zip(fields, ["varchar", "varchar", "bigint", "varchar", "varchar"])]
    versions, params = input_rows("v", columns, [(o.id, *(getattr(o, name) for name in fields)) for o in objs])
    # The extra condition on o.id lets the planner find the rows by index (rows.bulk_set says why).
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
