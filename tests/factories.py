"""Factories for API-level tests: real tenants and tokens made the way the commands make them."""

from rest_framework.test import APIClient

from schedules.tenants import tenant_create, worker_token_create


def make_tenant(name: str = "acme", *, job_types: list[str] | None = None, **quotas):
    """A tenant with its token's secret attached as `tenant.secret`."""
    tenant, secret = tenant_create(name=name, job_types=job_types, **quotas)
    tenant.secret = secret
    return tenant


def make_worker_token(name: str = "worker-1", *, resource_classes: list[str] | None = None):
    """A worker ApiToken with its secret attached as `token.secret`."""
    token, secret = worker_token_create(name, resource_classes=resource_classes)
    token.secret = secret
    return token


def api_client(credential=None) -> APIClient:
    """A JSON API client; `credential` is a secret string or anything with `.secret`."""
    client = APIClient()
    client.default_format = "json"
    if credential is not None:
        secret = credential if isinstance(credential, str) else credential.secret
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client
