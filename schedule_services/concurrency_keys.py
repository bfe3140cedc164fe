"""Concurrency keys: how many attempts of a tenant's schedules sharing a key (the schedule
field `concurrencyKey`) may run at once. The limit is kept here; the claim checks it, under
the tenant's lock, on database time (runs.authority.claims): never more attempts of a key
running than its limit, whatever number of claimers."""

from django.db import transaction
from django.db.models import Count

from kernel.errors import NotFound, QuotaExceeded
from runs.authority.locks import lock_tenant
from runs.models import Run, RunState
from schedules.models import ConcurrencyLimit, DEFAULT_CONCURRENCY_LIMIT, Schedule, Tenant

MAX_KEYS = 1_000  # limits set per tenant


def key_limit_set(*, tenant: Tenant, key: str, limit: int) -> dict:
    """Set the key's limit (created if it has none): the claims from now on apply it; attempts
    already running above a lowered limit end as they would, and no more start until below it."""
    with transaction.atomic(durable=True):
        lock_tenant(tenant)  # the limits counted against MAX_KEYS take turns
        updated = ConcurrencyLimit.objects.filter(tenant=tenant, key=key).update(max_running=limit)
        if not updated:
            held = ConcurrencyLimit.objects.filter(tenant=tenant).count()
            if held >= MAX_KEYS:
                raise QuotaExceeded(f"tenant has {held} concurrency limits; its quota is {MAX_KEYS}",
                                    details={"quota": "maxConcurrencyKeys", "limit": MAX_KEYS})
            ConcurrencyLimit.objects.create(tenant=tenant, key=key, max_running=limit)
    return concurrency_key(tenant=tenant, key=key)


def key_limit_delete(*, tenant: Tenant, key: str) -> None:
    """Forget the key's limit: its schedules' attempts run one at a time again (the default)."""
    deleted, _ = ConcurrencyLimit.objects.filter(tenant=tenant, key=key).delete()
    if not deleted:
        raise NotFound(f"no limit is set for concurrency key {key}")


def concurrency_keys(*, tenant: Tenant) -> list[dict]:
    """Every key the tenant set a limit for or one of its live schedules uses, by key."""
    return _keys(tenant)


def concurrency_key(*, tenant: Tenant, key: str) -> dict:
    found = _keys(tenant, key)
    if not found:
        raise NotFound(f"no live schedule uses concurrency key {key} and no limit is set for it")
    return found[0]


def _keys(tenant: Tenant, key: str | None = None) -> list[dict]:
    only = {} if key is None else {"key": key}
    limits = dict(ConcurrencyLimit.objects.filter(tenant=tenant, **only).values_list("key", "max_running"))
    only = {} if key is None else {"concurrency_key": key}
    used = dict(Schedule.objects.filter(tenant=tenant, deleted_at__isnull=True, **only).exclude(concurrency_key="")
                .values("concurrency_key").annotate(n=Count("id")).order_by().values_list("concurrency_key", "n"))
    only = {} if key is None else {"schedule__concurrency_key": key}
    running = dict(Run.objects.filter(tenant=tenant, state=RunState.RUNNING, **only)
                   .exclude(schedule__concurrency_key="").values("schedule__concurrency_key")
                   .annotate(n=Count("id")).order_by().values_list("schedule__concurrency_key", "n"))
    return [
        {"key": name, "limit": limits.get(name, DEFAULT_CONCURRENCY_LIMIT), "limitSet": name in limits,
         "running": running.get(name, 0), "schedules": used.get(name, 0)}
        for name in sorted(limits.keys() | used.keys())
    ]
