"""Statements on the outbox: the claim spending dispatch hints, the relay leasing and marking
intents, the wake-up of relays. Every writer of many outbox rows locks them in id order
(outbox_in_id_order), after any run lock it holds."""

from django.db import transaction
from django.db.models import BooleanField, F, Func, Q, Subquery
from django.db.models.expressions import RawSQL

from runs.authority.statements import dialect
from runs.authority.statements.dialect import among, now_sql, pg_array, row_locks
from runs.models import Outbox, OutboxKind

OUTBOX = Outbox._meta.db_table
OUTBOX_CHANNEL = "scheduler_outbox"


def outbox_notify() -> None:
    """Wake the relays listening on OUTBOX_CHANNEL when this transaction commits (one
    notification per transaction, however many intents; none if it rolls back). Only a
    wake-up: relays poll the outbox all the same. No lock."""
    if dialect.postgresql():
        with dialect.cursor() as cursor:
            cursor.execute(f"SELECT pg_notify('{OUTBOX_CHANNEL}', '')", [])


def outbox_mark_dispatched(run_ids: list[str]) -> None:
    """The dispatch intents of these claimed runs are served: their hints are spent. The
    caller (a claim) holds the runs' locks; the intents are locked in id order here."""
    if not dialect.postgresql():
        condition, params = among("run_id", run_ids)
        with dialect.cursor() as cursor:
            cursor.execute(f"UPDATE {OUTBOX} SET processed_at = {now_sql()}"
                           f" WHERE {condition} AND kind = %s AND processed_at IS NULL", [*params, OutboxKind.DISPATCH])
        return
    # Each run's intents looked up through the run_id index, one lookup per run (OFFSET 0 keeps
    # the lookup per run). As one `run_id = ANY(...)` condition, a planner with no statistics
    # of the outbox (a new database's first wave, before autovacuum analyzed it) counts 0.5 %
    # of the table per id and, for a claim's few dozen ids, reads the whole table instead.
    # The rows found are locked in id order, as every multi-row writer of the outbox locks them
    # (outbox_in_id_order says why), not in the claim's order of runs; never
    # skipped: an intent left unprocessed would stay in the unprocessed index for good.
    sql = (
        f"UPDATE {OUTBOX} SET processed_at = {now_sql()} WHERE id = ANY(ARRAY("
        f" SELECT o.id FROM unnest(%s::varchar[]) AS c(run_id) CROSS JOIN LATERAL ("
        f"  SELECT id FROM {OUTBOX} WHERE run_id = c.run_id AND kind = %s AND processed_at IS NULL OFFSET 0"
        f" ) AS f JOIN {OUTBOX} AS o ON o.id = f.id ORDER BY o.id{row_locks(False, of='o')}))"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [pg_array(run_ids), OutboxKind.DISPATCH])


def outbox_lease_unpublished(now, until, limit: int) -> list[tuple]:
    """Take a relay lease (``relay_until``, one more publish attempt) on up to ``limit``
    unpublished dispatch intents whose lease is free at ``now``, oldest first, skipping rows
    another relay holds; returns their ``(id, run id, resource class)`` in id order. On
    PostgreSQL one statement, the ids bound as one array. The caller holds no lock."""
    due = Outbox.objects.filter(kind=OutboxKind.DISPATCH, published_at__isnull=True).filter(
        Q(relay_until__isnull=True) | Q(relay_until__lte=now))
    if not dialect.postgresql():
        rows = list(due.order_by("id").select_for_update(skip_locked=True).values_list(
            "id", "run_id", "resource_class")[:limit])
        Outbox.objects.filter(id__in=[row[0] for row in rows]).update(
            relay_until=until, publish_attempts=F("publish_attempts") + 1)
        return rows
    sql = (
        f"UPDATE {OUTBOX} SET relay_until = %s, publish_attempts = publish_attempts + 1 WHERE id IN ("
        f" SELECT id FROM {OUTBOX} WHERE kind = %s AND published_at IS NULL"
        f"  AND (relay_until IS NULL OR relay_until <= %s)"
        f" ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, run_id, resource_class"
    )
    with dialect.cursor() as cursor:
        cursor.execute(sql, [until, OutboxKind.DISPATCH, now, limit])
        return sorted(cursor.fetchall())


def outbox_in_id_order(rows, *, skip_locked: bool = False):
    """The rows of the queryset ``rows`` (outbox rows), for one multi-row UPDATE or DELETE that
    locks them in id order first (``id = ANY(ARRAY(SELECT id ... ORDER BY id FOR NO KEY UPDATE)))``);
    inside a transaction. Every writer of many outbox rows at once takes them in this order
    (outbox_mark_dispatched spells it in its own SQL), so two such statements wait for
    each other instead of each holding a row the other needs next: the relay marking a
    batch published and a claim marking the same intents processed deadlocked that way.
    With ``skip_locked``, rows another transaction holds are left out: for a writer whose
    change the holder makes moot. SQLite has no row locks (one writer at a time): ``rows``."""
    if not dialect.locks_rows():
        return rows
    locked = rows.order_by("pk").select_for_update(no_key=True, skip_locked=skip_locked, of=("self",)).values("pk")
    # ``id = ANY(ARRAY(...))``: every row locked first, by a subplan run once, then each written
    # by primary key. Joined as ``id IN (...)``, the planner may read the whole table to match
    # them (a new database's outbox, before its first ANALYZE).
    return rows.model.objects.filter(Func(F("pk"), Subquery(locked), arg_joiner=" = ANY(ARRAY",
                                          template="%(expressions)s)", output_field=BooleanField()))


def outbox_set(ids: list[int], **changes) -> int:
    """Write ``changes`` to the outbox rows ``ids``, waiting for any claim that holds one
    (outbox_in_id_order): a claim marking a row processed does not make its publication less
    true. On PostgreSQL the ids are one array. The caller holds no lock (the relay writes after
    publishing, outside any transaction of its own)."""
    if not dialect.postgresql():
        return Outbox.objects.filter(id__in=ids).update(**changes)
    rows = Outbox.objects.filter(RawSQL('"id" = ANY(%s::bigint[])', [list(ids)], output_field=BooleanField()))
    with transaction.atomic():
        return outbox_in_id_order(rows).update(**changes)
