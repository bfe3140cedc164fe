"""Schedule reads, always scoped to the calling tenant."""

from schedules import recurrence
from schedules.models import ApiToken, JobType, Schedule, ScheduleLabel, ScheduleRevision, Tenant
from kernel.connections import server_cursor
from kernel.errors import NotFound
from kernel.rows import Rows


# Every API request reads its token with its tenant: one statement written out, not compiled by
# the ORM per request (its select_related cost more CPU than the rest of a `GET /runs/{id}`'s
# reads), the two built by kernel.rows.
_TOKEN, _TENANT = Rows(ApiToken), Rows(Tenant)
_LIVE_TOKEN = (
    f"SELECT {_TOKEN.columns('t')}, {_TENANT.columns('n')} FROM {ApiToken._meta.db_table} t"
    f" LEFT JOIN {Tenant._meta.db_table} n ON n.id = t.tenant_id WHERE t.token_hash = %s AND t.revoked_at IS NULL"
)


def live_token(token_hash: str) -> ApiToken | None:
    """The unrevoked token of ``token_hash``, with its tenant (None for an operator or worker
    token); None when there is none."""
    with server_cursor(prepared=True) as cursor:
        cursor.execute(_LIVE_TOKEN, [token_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(_TOKEN.fields)
    [token] = _TOKEN.build([row[:width]])
    if token.tenant_id is None:
        return token
    [tenant] = _TENANT.build([row[width:]])
    if tenant.id is None:  # deleted since, taking its tokens with it
        return None
    token.tenant = tenant
    return token


def schedule_get(*, tenant: Tenant, schedule_id: str) -> Schedule:
    schedule = Schedule.objects.filter(id=schedule_id, tenant=tenant, deleted_at__isnull=True).select_related(
        "job_type").first()
    if schedule is None:
        raise NotFound("no such schedule")
    return schedule


def schedule_check_for_history(*, tenant: Tenant, schedule_id: str) -> None:
    """NotFound unless the tenant has (or had) the schedule: deleted schedules keep their
    history (runs, revisions) readable. No Schedule built: the history is read by its id."""
    with server_cursor(prepared=True) as cursor:  # every page of a schedule's history reads it
        cursor.execute(f"SELECT 1 FROM {Schedule._meta.db_table} WHERE id = %s AND tenant_id = %s",
                       [schedule_id, tenant.pk])
        if cursor.fetchone() is None:
            raise NotFound("no such schedule")


def schedules_matching(*, tenant: Tenant, labels: dict | None = None, job_type: str | None = None):
    """The tenant's live schedules carrying every one of `labels` (and of `job_type`), a query."""
    schedules = Schedule.objects.filter(tenant=tenant, deleted_at__isnull=True)
    if job_type is not None:
        schedules = schedules.filter(job_type_id=job_type)
    for key, value in (labels or {}).items():
        schedules = schedules.filter(
            id__in=ScheduleLabel.objects.filter(tenant=tenant, key=key, value=value).values("schedule_id")
        )
    return schedules


def schedules_list(*, tenant: Tenant, after_id: str | None, limit: int, labels: dict | None = None) -> list[Schedule]:
    schedules = schedules_matching(tenant=tenant, labels=labels).select_related("job_type").order_by("id")
    if after_id:
        schedules = schedules.filter(id__gt=after_id)
    return list(schedules[:limit])


def schedule_local_next_run(schedule: Schedule) -> str | None:
    """The next run on the rule's wall clock; null when it cannot be shown. Only the zone is
    read, so even a row stored under older, looser rules renders."""
    if schedule.next_run_at is None:
        return None
    zone = schedule.recurrence.get("timezone") if isinstance(schedule.recurrence, dict) else None
    return recurrence.render_local(zone or "UTC", schedule.next_run_at)



def unavailable_job_types() -> frozenset[str]:
    """Job types whose declaration is gone (disabled in the catalog, workers.jobs.catalog):
    their schedules' runs wait until it is back. The catalog is a few rows."""
    with server_cursor(prepared=True) as cursor:  # read by every look at a waiting run: written out, as _LIVE_TOKEN
        cursor.execute(f"SELECT name FROM {JobType._meta.db_table} WHERE NOT enabled")
        return frozenset(name for (name,) in cursor.fetchall())


def job_types_allowed(*, tenant: Tenant) -> list[JobType]:
    """The enabled job types this tenant may schedule, by name."""
    return list(tenant.allowed_job_types.filter(enabled=True).order_by("name"))


def schedule_revisions(*, schedule_id: str, before: int | None, limit: int) -> list[ScheduleRevision]:
    """The schedule's revisions, newest first, those numbered below `before` when given."""
    revisions = ScheduleRevision.objects.filter(schedule_id=schedule_id).order_by("-revision")
    if before is not None:
        revisions = revisions.filter(revision__lt=before)
    return list(revisions[:limit])


def schedule_rule(schedule: Schedule) -> recurrence.Rule | None:
    """The schedule's stored rule in its window, under its calendars; None for a row stored under older, looser
    rules that no longer parses."""
    from schedules.calendars import rule_bound, stored_rule

    rule = stored_rule(schedule)
    return rule_bound(rule, schedule.tenant_id) if rule is not None else None


# Windows (activeFrom, activeUntil, endAfterOccurrences). `schedule` is a Schedule or any row
# with its attributes (the materializer's DueSchedule).


def occurrences_left(schedule) -> int | None:
    """Rule instants the schedule may still materialize; None: no end by count."""
    if schedule.end_after_occurrences is None:
        return None
    return max(0, schedule.end_after_occurrences - schedule.occurrences_materialized)


def schedule_first_due(schedule, rule: recurrence.Rule, now):
    """The first instant not before ``now`` of ``rule`` in the schedule's window; None once
    the schedule has materialized its endAfterOccurrences."""
    if occurrences_left(schedule) == 0:
        return None
    return recurrence.first_not_before(rule.within(schedule.active_from, schedule.active_until), now)


def schedule_ended(schedule, now=None) -> bool:
    """Whether the schedule is past its end: its endAfterOccurrences materialized, its
    activeUntil passed (``now``: a callable answering the authority's time, asked only
    then), or, running, its rule without another instant in its window."""
    if schedule.deleted_at is not None:
        return False
    if occurrences_left(schedule) == 0:
        return True
    if schedule.next_run_at is not None:
        return False
    kind = schedule.recurrence.get("kind") if isinstance(schedule.recurrence, dict) else None
    if not schedule.paused and kind != "after_completion":
        return True
    return schedule.active_until is not None and now is not None and schedule.active_until < now()
