"""Tenants and API credentials: creation only. Secrets are returned once, stored hashed."""

import secrets

from django.conf import settings
from django.db import transaction

from kernel.errors import InvalidRequest
from schedules.celery_task_allowlist import celery_tasks_normalized
from schedules.models import ApiToken, DEFAULT_MAX_STORED_BYTES, JobType, Tenant, TokenKind


def _new_secret() -> str:
    return secrets.token_urlsafe(32)


@transaction.atomic(durable=True)
def tenant_create(
    *,
    name: str,
    job_types: list[str] | None = None,
    max_schedules: int = 1000,
    max_active_runs: int = 100,
    max_emails_per_day: int = 1000,
    max_pending_manual_runs: int = 1000,
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
    weight: int = 1,
    celery_tasks: list[str] | None = None,
) -> tuple[Tenant, str]:
    """A new tenant and its first tenant token's secret.

    With `job_types` None the tenant may use every job type; otherwise exactly those named.
    The catalog's rows come from the job declarations, synced at every `migrate`.
    `celery_tasks` are the Celery task names the tenant may run through `celery.task` (none by default).
    """
    if weight < 1:
        raise InvalidRequest("weight must be at least 1", field="weight")
    quotas = {"max_schedules": max_schedules, "max_active_runs": max_active_runs,
              "max_emails_per_day": max_emails_per_day, "max_pending_manual_runs": max_pending_manual_runs,
              "max_stored_bytes": max_stored_bytes}
    if min(quotas.values()) < 0:
        raise InvalidRequest("quotas must not be negative")
    if Tenant.objects.filter(name=name).exists():
        raise InvalidRequest(f"a tenant named {name!r} already exists", field="name")
    if job_types is None:
        allowed = list(JobType.objects.all())
    else:
        allowed = list(JobType.objects.filter(name__in=job_types))
        missing = sorted(set(job_types) - {job_type.name for job_type in allowed})
        if missing:
            raise InvalidRequest(f"unknown job type(s): {', '.join(missing)}", field="jobTypes")
    tasks = celery_tasks_normalized(celery_tasks or [])
    tenant = Tenant.objects.create(name=name, weight=weight, celery_tasks=tasks, **quotas)
    tenant.allowed_job_types.set(allowed)
    _, secret = tenant_token_create(tenant=tenant, name=name)
    return tenant, secret


def tenant_token_create(*, tenant: Tenant, name: str) -> tuple[ApiToken, str]:
    secret = _new_secret()
    token = ApiToken.objects.create(
        kind=TokenKind.TENANT, name=name, tenant=tenant, token_hash=ApiToken.hash_secret(secret)
    )
    return token, secret


def worker_token_create(name: str, *, resource_classes: list[str] | None = None) -> tuple[ApiToken, str]:
    """A worker credential; its id is the worker's identity (`workerId` of the command). With
    ``resource_classes`` it may claim runs of those classes only."""
    classes = list(dict.fromkeys(resource_classes or []))
    unknown = [c for c in classes if c not in settings.RESOURCE_CLASSES]
    if unknown:
        raise ValueError(f"unknown resource classes {unknown}; known: {', '.join(settings.RESOURCE_CLASSES)}")
    secret = _new_secret()
    token = ApiToken.objects.create(
        kind=TokenKind.WORKER, name=name, token_hash=ApiToken.hash_secret(secret), resource_classes=classes
    )
    return token, secret


def operator_token_create(name: str) -> tuple[ApiToken, str]:
    """An operator credential: reads the whole installation's capacity forecast."""
    secret = _new_secret()
    token = ApiToken.objects.create(kind=TokenKind.OPERATOR, name=name, token_hash=ApiToken.hash_secret(secret))
    return token, secret


def token_revoke(token: ApiToken) -> bool:
    """Revoke a credential; False if it was already revoked."""
    from django.utils import timezone

    return bool(ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))
