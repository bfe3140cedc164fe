"""Run reads: the authoritative run, and keyset pages of a schedule's history."""

from datetime import timedelta

from django.db import connection
from django.db.models import F

from kernel.clock import authority_now
from kernel.connections import server_cursor
from kernel.rows import Rows
from runs.authority.statements.dialect import among, stored_time
from runs.models import ACTIVE_STATES, TERMINAL_STATES, Attempt, EffectIntent, Run
from schedules.models import Schedule
from kernel.errors import NotFound

__all__ = [
    "authority_now", "history_watermark", "run_get", "run_reread", "runs_page", "tenant_runs_page", "waiting_on_key",
    "with_concurrency_key", "with_details", "with_schedule",
]

# Used only when the database role cannot see other sessions' transaction start times.
WATERMARK_FALLBACK_LAG = timedelta(seconds=30)


def history_watermark():
    """An instant before which every run is committed, hence visible to this read.

    A run's created_at is authority time inside its creating transaction, so a run not yet
    committed was created after its transaction began: the start of the oldest open
    transaction (or now) bounds every run this read could be missing.
    """
    if connection.vendor != "postgresql":
        return authority_now()  # embedded SQLite: one writer at a time, readers see every commit
    with server_cursor(prepared=True) as cursor:  # every first page reads it
        cursor.execute(  # the authority's time read in the same statement (clock_timestamp: as authority_now)
            "SELECT clock_timestamp(), count(*) FILTER (WHERE xact_start IS NULL), min(xact_start) "
            "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend' AND state <> 'idle'"
        )
        now, hidden, oldest = cursor.fetchone()
    if hidden:
        return now - WATERMARK_FALLBACK_LAG
    return min(now, oldest) if oldest else now


# A run's shown columns (all but its payload, which the API never decodes) with its schedule's
# concurrency key, which `waiting_on_key` reads; then its attempts and effect intents with the
# columns shown, both in one statement. Written out once here rather than built per request by
# the ORM: compiling the ORM's statements cost more CPU than the rest of `GET /runs/{id}`
# together (2.0-2.5 ms against 0.8-0.9 ms for the same rows read from these texts), and the
# instances are built by kernel.rows (a third of Django's cost). Portable: PostgreSQL and SQLite.
_RUN = Rows(Run, exclude=["payload"], extra=["concurrency_key"])
_RUNS = (
    f"SELECT {_RUN.columns('r')}, s.concurrency_key AS concurrency_key "
    f"FROM {Run._meta.db_table} r JOIN {Schedule._meta.db_table} s ON s.id = r.schedule_id"
)
_RUN_BY_ID = f"{_RUNS} WHERE r.id = %s"
_ATTEMPT = Rows(Attempt, ("id", "run", "number", "state", "started_at", "finished_at", "error", "reason"))
_INTENT = Rows(EffectIntent, ("id", "run", "action", "kind", "state", "reason"))
# A row of _DETAILS_OF: its kind, then an attempt's columns, then an intent's (nulls where not its kind).
_ATTEMPT_COLUMNS = slice(1, 1 + len(_ATTEMPT.fields))
_INTENT_COLUMNS = slice(_ATTEMPT_COLUMNS.stop, _ATTEMPT_COLUMNS.stop + len(_INTENT.fields))


def _nulls(columns: slice) -> str:
    return ", ".join(["NULL"] * (columns.stop - columns.start))


_DETAILS_OF = (
    f"SELECT 0, {_ATTEMPT.columns('a')}, {_nulls(_INTENT_COLUMNS)} "
    f"FROM {Attempt._meta.db_table} a WHERE {{attempts_of}} "
    f"UNION ALL SELECT 1, {_nulls(_ATTEMPT_COLUMNS)}, {_INTENT.columns('e')} "
    f"FROM {EffectIntent._meta.db_table} e WHERE {{intents_of}} "
    # kind, then an attempt's number, an intent's action (positions count from 1)
    f"ORDER BY 1, {_ATTEMPT_COLUMNS.start + _ATTEMPT.attnames.index('number') + 1}, "
    f"{_INTENT_COLUMNS.start + _INTENT.attnames.index('action') + 1}"
)


# A page of history (_history_page): runs read as _RUN_BY_ID reads one, narrowed by the caller's
# conditions on ``r``, newest scheduled first. Written out for the reason above (building and compiling
# the ORM's page query was a fifth of a page's CPU in the web process); unprepared, as the planner keeps
# a custom plan for it.
_PAGE = _RUNS + " WHERE {narrowed} AND r.created_at <= %s{after} ORDER BY r.scheduled_at DESC, r.id DESC LIMIT %s"
_AFTER = " AND (r.scheduled_at < %s OR (r.scheduled_at = %s AND r.id < %s))"


def with_concurrency_key(runs):
    """``runs`` with their schedule's concurrency key (``concurrency_key``), which
    `waiting_on_key` reads: a column of the join, no Schedule built."""
    return runs.annotate(concurrency_key=F("schedule__concurrency_key"))


def with_details(runs: list[Run]) -> list[Run]:
    """``runs`` as the API shows them (read as _RUN reads them: with their concurrency key, without
    their payload), given their attempts in order (``attempt_list``) and effect intents by
    action (``effect_list``), read in one statement."""
    by_id = {run.id: run for run in runs}
    for run in runs:
        run.attempt_list, run.effect_list = [], []
    if runs:
        attempts_of, params = among("a.run_id", by_id)  # on PostgreSQL one array: one text, prepared
        intents_of, _ = among("e.run_id", by_id)
        with server_cursor(prepared=True) as cursor:
            cursor.execute(_DETAILS_OF.format(attempts_of=attempts_of, intents_of=intents_of), params + params)
            rows = cursor.fetchall()
        for attempt in _ATTEMPT.build(row[_ATTEMPT_COLUMNS] for row in rows if row[0] == 0):
            by_id[attempt.run_id].attempt_list.append(attempt)
        for intent in _INTENT.build(row[_INTENT_COLUMNS] for row in rows if row[0] == 1):
            by_id[intent.run_id].effect_list.append(intent)
    return runs


def with_schedule(runs: list[Run]) -> list[Run]:
    """``runs`` given their schedule (a console page names it and reads its zone), read in one
    statement."""
    schedules = Schedule.objects.in_bulk({run.schedule_id for run in runs})
    for run in runs:
        run.schedule = schedules[run.schedule_id]
    return runs


def run_get(*, tenant, run_id: str) -> Run:
    # Found by its primary key alone, its tenant checked on the row read: with the tenant in the
    # statement, a plan may read the tenant's history index as well (tests/runs/test_hot_path_plans.py).
    runs = [run for run in _RUN.read(_RUN_BY_ID, [run_id], prepared=True) if run.tenant_id == tenant.pk]
    if not runs:
        raise NotFound("no such run")
    return with_details(runs)[0]


def run_reread(run: Run) -> Run:
    """``run`` read again with its details, as `run_get` reads it: what a write returns."""
    return with_details(_RUN.read(_RUN_BY_ID, [run.id], prepared=True))[0]


def runs_page(*, schedule_id: str, upper_bound, after: tuple | None, limit: int, shown=with_details) -> list[Run]:
    """One page of a schedule's history (see `_history_page`)."""
    return _history_page([("r.schedule_id = %s", [schedule_id])], upper_bound=upper_bound, after=after, limit=limit,
                         shown=shown)


def tenant_runs_page(
    *, tenant, states=(), schedule_id=None, job_type=None, since=None, upper_bound, after, limit: int,
    shown=with_details,
) -> list[Run]:
    """One page of every run of the tenant's schedules, narrowed by the filters given:
    any of `states`, one schedule, one job type, `scheduled_at` at or after `since`."""
    narrowed = [("r.tenant_id = %s", [tenant.pk])]
    if states:
        narrowed.append(_in_states(states))
    if schedule_id is not None:
        narrowed.append(("r.schedule_id = %s", [schedule_id]))
    if job_type is not None:
        narrowed.append(("r.job_type = %s", [job_type]))
    if since is not None:
        narrowed.append(("r.scheduled_at >= %s", [stored_time(since)]))
    return _history_page(narrowed, upper_bound=upper_bound, after=after, limit=limit, shown=shown)


def _in_states(states) -> tuple[str, list]:
    """Runs in any of ``states``, each side of finished_at said outright (as UNFINISHED says
    it): finished states by the index of finished runs by state, live ones by the live indexes."""
    def among_states(values) -> str:  # a list spelled out: one state is `=`, which the index's order follows
        return f"r.state IN ({', '.join(['%s'] * len(values))})"

    sides, params = [], []
    finished = [state for state in states if state in TERMINAL_STATES]
    live = [state for state in states if state in ACTIVE_STATES]
    if finished:
        sides, params = sides + [f"({among_states(finished)} AND r.finished_at IS NOT NULL)"], params + finished
    if live:
        sides, params = sides + [f"(r.finished_at IS NULL AND {among_states(live)})"], params + live
    return f"({' OR '.join(sides) or '1 = 0'})", params


def _history_page(narrowed: list[tuple[str, list]], *, upper_bound, after: tuple | None, limit: int,
                  shown) -> list[Run]:
    """Runs meeting every condition of ``narrowed`` ((SQL on ``r``, its parameters)), ordered by
    (scheduled_at, id) descending, created no later than ``upper_bound``, strictly after the
    ``after`` keyset position. The pinned bound keeps pages stable. ``shown(runs)`` gives them
    what their reader shows with them: the API's `with_details`, the console's `with_schedule`,
    or with None nothing more."""
    params = [value for _, values in narrowed for value in values] + [stored_time(upper_bound)]
    after_sql = ""
    if after is not None:
        scheduled_at, run_id = after
        after_sql, params = _AFTER, params + [stored_time(scheduled_at), stored_time(scheduled_at), run_id]
    sql = _PAGE.format(narrowed=" AND ".join(condition for condition, _ in narrowed), after=after_sql)
    runs = _RUN.read(sql, [*params, limit])
    return shown(runs) if shown else runs


def waiting_on_key(runs) -> frozenset[str]:
    """The ids of those of `runs` queued while their schedule's concurrency key has as many
    attempts running as its limit allows (what the claim leaves queued): one statement, none
    when no queued run's schedule has a key (read with them by `with_concurrency_key`)."""
    from django.db.models import Count, F, OuterRef, Subquery, Value
    from django.db.models.functions import Coalesce

    from runs.models import RunState
    from schedules.models import DEFAULT_CONCURRENCY_LIMIT, ConcurrencyLimit

    ids = [run.id for run in runs if run.state == RunState.QUEUED and run.concurrency_key]
    if not ids:
        return frozenset()
    key = OuterRef("schedule__concurrency_key")
    running = (Run.objects.filter(tenant_id=OuterRef("tenant_id"), state=RunState.RUNNING, schedule__concurrency_key=key)
               .order_by().values("tenant_id").annotate(n=Count("id")).values("n"))
    limit = ConcurrencyLimit.objects.filter(tenant_id=OuterRef("tenant_id"), key=key).values("max_running")
    return frozenset(
        Run.objects.filter(id__in=ids, state=RunState.QUEUED).exclude(schedule__concurrency_key="")
        .annotate(running=Coalesce(Subquery(running), Value(0)),
                  limit=Coalesce(Subquery(limit), Value(DEFAULT_CONCURRENCY_LIMIT)))
        .filter(running__gte=F("limit")).values_list("id", flat=True)
    )
