"""Bearer-token authentication for the two kinds of API caller.

Tenant endpoints accept only tenant tokens, worker endpoints only worker tokens.
A missing, unknown or revoked token is 401; a valid token of the other kind is 403.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication

from schedules.models import ApiToken, TokenKind
from schedules.selectors import live_token
from kernel.errors import Forbidden, Unauthenticated

BEARER_PREFIX = "bearer "
# Longer than any secret we issue; bounds the hashing work on garbage input.
MAX_SECRET_LENGTH = 512


def presented_secret(request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        raise Unauthenticated("missing Authorization header")
    if header[: len(BEARER_PREFIX)].lower() != BEARER_PREFIX:
        raise Unauthenticated("Authorization must use the Bearer scheme")
    secret = header[len(BEARER_PREFIX) :].strip()
    if not secret or len(secret) > MAX_SECRET_LENGTH or not secret.isascii() or " " in secret:
        raise Unauthenticated("malformed bearer token")
    return secret


def token_authenticate(request, *, kind: str | tuple[str, ...]) -> ApiToken:
    """The live token presented with the request, which must be of `kind` (or one of them)."""
    secret = presented_secret(request)
    token = live_token(ApiToken.hash_secret(secret))
    if token is None:
        raise Unauthenticated("unknown or revoked token")
    kinds = (kind,) if isinstance(kind, str) else kind
    if token.kind not in kinds:
        raise Forbidden(f"this endpoint requires a {' or '.join(kinds)} token")
    return token


class _BearerAuthentication(BaseAuthentication):
    kind: str = ""

    def authenticate(self, request):
        token = token_authenticate(request, kind=self.kind)
        self.attach(request, token)
        # DRF's (user, auth) pair: there are no Django users on the API.
        return (None, token)

    def attach(self, request, token):
        raise NotImplementedError

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class TenantTokenAuthentication(_BearerAuthentication):
    kind = TokenKind.TENANT

    def attach(self, request, token):
        request.tenant = token.tenant
        request._request.tenant = token.tenant


class WorkerTokenAuthentication(_BearerAuthentication):
    kind = TokenKind.WORKER

    def attach(self, request, token):
        request.worker_token = token
        request._request.worker_token = token


class CapacityReaderAuthentication(_BearerAuthentication):
    """An operator token (the whole installation) or a tenant token (its own share)."""

    kind = (TokenKind.OPERATOR, TokenKind.TENANT)

    def attach(self, request, token):
        request.tenant = token.tenant  # None for an operator
        request._request.tenant = token.tenant


class TenantTokenScheme(OpenApiAuthenticationExtension):
    target_class = "scheduler_project.http.auth.TenantTokenAuthentication"
    name = "TenantToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Tenant API token"}


class WorkerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "scheduler_project.http.auth.WorkerTokenAuthentication"
    name = "WorkerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Worker API token"}


class CapacityReaderScheme(OpenApiAuthenticationExtension):
    target_class = "scheduler_project.http.auth.CapacityReaderAuthentication"
    name = "OperatorOrTenantToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Operator token, or a tenant token for its share"}
