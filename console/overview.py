"""What the Overview page shows, read with indexed queries: active runs by state, runs
finished in the last hour, due-to-start lateness of the last hour by tenant and resource
class, leases that have passed and that expired in the last hour, effects in `uncertain`;
and this process's counters (expired leases, stale-fence rejections) since it started."""

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count

from runs.metrics import counter_total
from runs.models import (
    ACTIVE_STATES, Attempt, EffectIntent, EffectState, Run, RunState, Trigger, UNFINISHED,
)
from schedules.models import Tenant

WINDOW = timedelta(hours=1)


@dataclass
class Lateness:
    tenant: str
    resource_class: str
    started: int
    p50: float
    p99: float
    objective: float

    @property
    def breach(self) -> bool:
        return self.p99 > self.objective


def state_counts(now) -> dict:
    """Active runs by state (the unfinished runs' index), finished ones of the last hour by
    state (the finished_at index)."""
    active = dict(Run.objects.filter(UNFINISHED).values_list("state").annotate(n=Count("id")))
    finished = dict(
        Run.objects.filter(finished_at__gte=now - WINDOW).values_list("state").annotate(n=Count("id"))
    )
    return {
        "active": [(state, active.get(state, 0)) for state in ACTIVE_STATES],
        "finished": [(state, finished.get(state, 0)) for state in
                     (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELED, RunState.SKIPPED)],
    }


def lateness_by_tenant_and_class(now) -> list[Lateness]:
    """Scheduled occurrences due in the last hour that have started: p50 and p99 of
    started_at - scheduled_at (the first start, as scheduler_due_to_start_seconds), read per
    tenant from the (tenant, scheduled_at) index."""
    names = dict(Tenant.objects.values_list("id", "name"))
    if connection.vendor == "postgresql":
        return [_lateness(names, *row) for row in _postgres_percentiles(list(names), now)]
    rows = (
        Run.objects.filter(
            tenant_id__in=list(names), scheduled_at__gte=now - WINDOW, scheduled_at__lte=now,
            trigger=Trigger.SCHEDULE, started_at__isnull=False,
        )
        .values_list("tenant_id", "resource_class", "scheduled_at", "started_at")
    )
    groups: dict[tuple, list[float]] = {}
    for tenant_id, resource_class, scheduled_at, started_at in rows.iterator():
        groups.setdefault((tenant_id, resource_class), []).append(max(0.0, (started_at - scheduled_at).total_seconds()))
    return [
        _lateness(names, tenant_id, resource_class, len(values), _percentile(values, 0.5), _percentile(values, 0.99))
        for (tenant_id, resource_class), values in sorted(groups.items())
    ]


def _lateness(names, tenant_id, resource_class, started, p50, p99) -> Lateness:
    return Lateness(names.get(tenant_id, tenant_id), resource_class, started, round(p50, 3), round(p99, 3),
                    settings.CONSOLE_START_OBJECTIVE_SECONDS)


def _postgres_percentiles(tenant_ids: list[str], now) -> list[tuple]:
    sql = (
        "SELECT tenant_id, resource_class, count(*), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness), "
        "percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness) FROM ("
        "  SELECT tenant_id, resource_class, "
        "  greatest(0, extract(epoch FROM started_at - scheduled_at)) AS lateness FROM runs_run"
        "  WHERE tenant_id = ANY(%s) AND scheduled_at >= %s AND scheduled_at <= %s"
        "  AND trigger = 'schedule' AND started_at IS NOT NULL"
        ") AS late GROUP BY tenant_id, resource_class ORDER BY tenant_id, resource_class"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [tenant_ids, now - WINDOW, now])
        return [(t, c, n, float(p50), float(p99)) for t, c, n, p50, p99 in cursor.fetchall()]


def _percentile(values: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as PostgreSQL's percentile_cont."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def health(now) -> dict:
    return {
        # Running runs whose lease has passed, not yet swept (the running runs' index, read whole:
        # running runs are as many as the workers' slots).
        "leases_passed": Run.objects.filter(state=RunState.RUNNING, lease_expires_at__lt=now).count(),
        # Attempts the sweeper expired in the last hour, whichever process swept them (attempt_expired_at_idx).
        "expired_leases_last_hour": Attempt.objects.filter(expired_at__gte=now - WINDOW, expired_at__lte=now).count(),
        "expired_leases_total": counter_total("scheduler_expired_leases"),
        "stale_rejections_total": counter_total("scheduler_stale_fence_rejections"),
        "uncertain_effects": EffectIntent.objects.filter(state=EffectState.UNCERTAIN).count(),
    }
