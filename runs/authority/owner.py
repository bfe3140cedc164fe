"""The ownership rule, defined once: an attempt owns its run while

1. the run is running,
2. the attempt is the run's current attempt,
3. the run carries the caller's fence,
4. the attempt carries the caller's fence,
5. the attempt is running, and
6. the run's lease has not passed: it ends strictly after database time (never a worker's
   clock). A lease that ends at this very instant has passed, and nothing revives a passed
   lease: a heartbeat is judged by this same rule, so only the sweeper acts on it.

It has two forms, side by side below and clause for clause the same. In Python, on a loaded
run and attempt or on the columns a statement read (`stale_reason`, `require_current`):
completion, the heartbeat of one attempt and the embedded SQLite's heartbeats, staging's
general path, cleanup's re-check, the group commit. In SQL (`owns_sql`, named in the
statements that use it: statements.attempts.attempts_extend_leases_if_owned,
statements.objects.objects_register_if_owned; through `owns_filter`: statements.runs
(runs_set_progress_if_owned, runs_exist_if_owned); `leased_sql`, clause 6 alone: the group commit,
which reads the other clauses as columns). The SQL is one text for both databases; only
database time is spelled per database (statements.dialect.clock_sql).

The one deliberate difference between the paths is a named parameter of `owns_sql`:
``attempt_id`` instead of ``attempt``, for a statement on the run alone (progress,
still_owns). It checks clauses 1, 2, 3 and 6; clauses 4 and 5 then hold by themselves: a
claim gives the run a new fence and its new attempt that fence, running, in one
transaction, and every transition that ends an attempt (completion, the group commit, the
sweep) moves its run out of running in the same transaction. Joining the attempt's row
would cost a lookup per call and change no answer.
"""

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from runs.authority.statements.dialect import checked, clock_sql
from runs.models import Attempt, AttemptState, Run, RunState
from kernel.errors import StaleFence


def stale_reason(*, run_state: str, current_attempt_id: str | None, run_fence: int, attempt_id: str,
                 attempt_fence: int, attempt_state: str, fence: int, leased: bool) -> str | None:
    """The rule in Python: None when the attempt owns the run; else why not: "fence" (clauses
    1 to 5: not the current attempt, fence or state) or "lease" (clause 6; ``leased``: the
    lease had not passed at database time)."""
    if (run_state != RunState.RUNNING or current_attempt_id != attempt_id or run_fence != fence
            or attempt_fence != fence or attempt_state != AttemptState.RUNNING):
        return "fence"
    return None if leased else "lease"


def require_current(run: Run, attempt: Attempt, fence: int, now) -> None:
    """StaleFence unless ``attempt`` owns ``run`` at authority time ``now`` (read from the
    database after the caller's lock waits: kernel.clock.authority_now)."""
    reason = stale_reason(run_state=run.state, current_attempt_id=run.current_attempt_id, run_fence=run.fence,
                          attempt_id=attempt.id, attempt_fence=attempt.fence, attempt_state=attempt.state,
                          fence=fence, leased=run.lease_expires_at is not None and run.lease_expires_at > now)
    if reason == "fence":
        raise StaleFence("fence is no longer current", details={"currentFence": run.fence})
    if reason == "lease":
        raise StaleFence("lease has expired", details={"currentFence": run.fence})


def owns_sql(run: str, fence: str, *, attempt: str | None = None, attempt_id: str | None = None) -> str:
    """The rule in SQL over the run's table aliased ``run`` and the caller's ``fence`` (an SQL
    expression: a column or a placeholder), on the statement's database time. The attempt is
    either ``attempt``, the alias of its joined row (every clause), or ``attempt_id``, an SQL
    expression of its id, for a statement on the run alone (clauses 4 and 5 hold by themselves:
    the module's docstring says why). A check of rows the statement finds by their ids
    (dialect.checked() says why), never a search condition."""
    if (attempt is None) == (attempt_id is None):
        raise TypeError("owns_sql takes the attempt's row (attempt) or its id (attempt_id)")
    if attempt is not None:
        clauses = (f"{run}.state = '{RunState.RUNNING}' AND {run}.current_attempt_id = {attempt}.id"
                   f" AND {run}.fence = {fence} AND {attempt}.fence = {fence}"
                   f" AND {attempt}.state = '{AttemptState.RUNNING}'")
    else:
        clauses = (f"{run}.state = '{RunState.RUNNING}' AND {run}.current_attempt_id = {attempt_id}"
                   f" AND {run}.fence = {fence}")
    return checked(f"{clauses} AND {leased_sql(run)}")


def owns_filter(attempt_id: str, fence: int) -> RawSQL:
    """owns_sql on the run alone as a filter of Run querysets (``Run.objects.filter(owns_filter(
    ...), id=...)``: a check of the run found by its id, whatever the statistics say)."""
    return RawSQL(owns_sql(f'"{Run._meta.db_table}"', "%s", attempt_id="%s"), [attempt_id, fence],
                  output_field=BooleanField())


def leased_sql(run: str) -> str:
    """Clause 6 in SQL: ``run``'s lease has not passed at database time, read after the
    statement's lock waits (a statement that reads the other clauses as columns, for
    stale_reason's ``leased``)."""
    return f"{run}.lease_expires_at > {clock_sql()}"
