"""Statements on the registry of stored objects: an upload registered before it begins (the
attempt must own its run) and its written version recorded after it; cleanup's batch of
candidates locked with their runs and re-checked (unsettled effects, uploading attempts),
and the deleted ones' bytes taken off their tenants' storage. Objects come last in the lock
order (runs/authority/locks.py), after their run, and before the tenant's storage figure."""

from django.db.models import F, Q

from runs.authority.owner import owns_sql
from runs.authority.statements import dialect
from runs.authority.statements.dialect import among, checked, checked_q, clock_sql, input_rows, read_time, row_locks
from runs.models import Attempt, EffectIntent, EffectState, ObjectState, Run, StoredObject, TenantStorage
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
    with dialect.cursor() as cursor:
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
    with dialect.cursor() as cursor:
        cursor.execute(sql, [*params, *known_params])
        return {row[0] for row in cursor.fetchall()}


# Cleanup (runs.authority.objects): a batch of candidates re-checked under lock, marked
# `deleting`, and recorded `deleted` once the store confirms.

CLEANUP_RUN_FIELDS = ("id", "state", "finished_at", "current_attempt_id", "fence", "lease_expires_at")


def runs_lock_of_objects(run_ids) -> dict[str, Run]:
    """Lock the runs of a batch of cleanup candidates (FOR UPDATE, in id order: the run level
    of runs/authority/locks.py, before their registry rows) and load what cleanup's checks
    read of them (CLEANUP_RUN_FIELDS), by id; a run removed meanwhile is missing. The caller
    holds no lock."""
    runs = Run.objects.select_for_update().filter(id__in=sorted(set(run_ids))).order_by("id")
    return {run.id: run for run in runs.only(*CLEANUP_RUN_FIELDS)}


def objects_lock_among(candidates) -> list[StoredObject]:
    """Lock the registry rows of ``candidates`` (``(object id, run id)`` pairs; FOR UPDATE, in
    id order) and load them, each only if it still belongs to the run named with it. The
    caller holds those runs' locks (runs_lock_of_objects)."""
    wanted = set(candidates)
    rows = StoredObject.objects.select_for_update().filter(id__in=sorted({i for i, _ in wanted})).order_by("id")
    return [obj for obj in rows if (obj.id, obj.run_id) in wanted]


def intents_read_unsettled(results) -> set[tuple[str, str]]:
    """Of ``results`` (``(run id, object key)`` pairs), those an effect intent still waits to
    deliver (pending or uncertain), in one statement for all the runs. No lock: the caller
    holds the runs' locks, and an intent is only created when its run is published."""
    results = set(results)
    if not results:
        return set()
    waiting = EffectIntent.objects.filter(
        run_id__in=sorted({run_id for run_id, _ in results}), state__in=(EffectState.PENDING, EffectState.UNCERTAIN),
    ).values_list("run_id", "result_key")
    return results.intersection(waiting)


def attempts_read_among(ids) -> dict[str, Attempt]:
    """The attempts of these ids (one statement), by id; no lock: what cleanup's ownership
    check reads of them only changes under their run's lock, which the caller holds."""
    ids = sorted(set(ids))
    return Attempt.objects.in_bulk(ids) if ids else {}


def objects_lock_deleting(ids) -> list[tuple[int, str, bool, int | None]]:
    """Lock the registry rows of these ids still `deleting` (FOR UPDATE, in id order), and
    read ``(id, tenant id, counted, size)`` of each. The caller holds no lock: a row another
    cleanup recorded `deleted` meanwhile is left out."""
    if not ids:
        return []
    return list(
        StoredObject.objects.select_for_update(of=("self",))
        .filter(checked_q(Q(state=ObjectState.DELETING)), id__in=sorted(set(ids))).order_by("id")
        .values_list("id", "run__tenant_id", "counted", "size")
    )


def tenants_take_off_storage(removed: dict[str, int]) -> None:
    """Take ``removed`` bytes (by tenant id) off each tenant's storage, one UPDATE per tenant
    in tenant order, so that two cleanups never wait on each other. The caller holds the
    locks of the registry rows whose bytes these are (the level above in the lock order)."""
    for tenant_id, size in sorted(removed.items()):
        if size:
            TenantStorage.objects.filter(tenant_id=tenant_id).update(stored_bytes=F("stored_bytes") - size)
