"""Statements on attempts' leases: the heartbeat of many attempts at once."""

from django.conf import settings

from runs.authority.owner import owns_sql
from runs.authority.statements import dialect
from runs.authority.statements.dialect import pg_array
from runs.models import Attempt, Run


def attempts_extend_leases_if_owned(held: list[tuple[str, int]]) -> dict[str, bool]:
    """Extend, in one statement, the lease of every ``(attempt id, fence)`` in ``held`` whose
    attempt still owns its run (owner.owns_sql: a passed lease is not revived), each by
    its own lease length from database time, never past its deadline by more than the
    timeout grace (leases.lease_until; LEAST ignores a null deadline). Returns
    ``{attempt id: cancellation requested}`` for those; an attempt missing from the answer
    has lost its run. The caller holds no lock: the UPDATE takes each run's, then its
    attempt's (run before attempt, as everywhere). PostgreSQL only: the embedded SQLite
    extends one lease at a time (ownership.heartbeat_many)."""
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
    with dialect.cursor() as cursor:
        cursor.execute(sql, [settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS, pg_array(a for a, _ in held),
                             pg_array(f for _, f in held)])
        return dict(cursor.fetchall())
