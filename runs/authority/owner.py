"""The ownership rule, in one place: an attempt owns its run while the run is running, the
attempt is the run's current attempt, run and attempt carry the caller's fence, the attempt
is running, and the run's lease has not passed on database time (never a worker's clock).

Every path that acts for an attempt asks it here, in the form it needs: a loaded run and
attempt (`stale_reason`: completion, staging's general path, cleanup's re-check), a row a
statement read (`stale_reason` on its columns: the group commit), an SQL condition over
aliased tables (`owns_sql`: lease extension, upload registration) and a filter of the run
alone (`owns_filter`: progress, which reads no attempt; a run's current attempt carries the
run's fence, so the attempt's columns add nothing there).
"""

from django.db.models import Q

from runs.authority.claim_sql import checked, clock_sql
from runs.models import AttemptState, RunState


def stale_reason(*, run_state: str, current_attempt_id: str | None, run_fence: int, attempt_id: str,
                 attempt_fence: int, attempt_state: str, fence: int, leased: bool) -> str | None:
    """None when the attempt owns the run; else why not: "fence" (not the current attempt,
    fence or state) or "lease" (the lease has passed; ``leased``: it had not at database time)."""
    if (run_state != RunState.RUNNING or current_attempt_id != attempt_id or run_fence != fence
            or attempt_fence != fence or attempt_state != AttemptState.RUNNING):
        return "fence"
    return None if leased else "lease"


def owns_sql(run: str, attempt: str, fence: str) -> str:
    """The rule as an SQL condition over ``run`` and ``attempt`` (table aliases) and the
    caller's ``fence`` (an SQL expression), on the statement's database time: a check of rows
    the statement finds by their ids (checked() says why)."""
    return checked(f"{run}.state = '{RunState.RUNNING}' AND {run}.current_attempt_id = {attempt}.id"
            f" AND {run}.fence = {fence} AND {attempt}.fence = {fence} AND {attempt}.state = '{AttemptState.RUNNING}'"
            f" AND {leased_sql(run)}")


def leased_sql(run: str) -> str:
    """The lease half of the rule in SQL: ``run``'s lease has not passed at database time
    (a statement that reads the rest as columns, for stale_reason's ``leased``)."""
    return f"{run}.lease_expires_at > {clock_sql()}"


def owns_filter(attempt_id: str, fence: int, now) -> Q:
    """The rule as a filter of runs (``now``: database time, an expression or a value)."""
    return Q(state=RunState.RUNNING, current_attempt_id=attempt_id, fence=fence, lease_expires_at__gt=now)
