"""Base views and request-reading helpers shared by the API's views.

Views authenticate, read and validate the request's shape, call one service or selector,
and render the result. They never change state themselves.
"""

import re

from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.views import APIView

from schedules.audit import Actor
from schedules.models import AuthorKind
from kernel.errors import InvalidRequest
from scheduler_project.http.auth import TenantTokenAuthentication, WorkerTokenAuthentication
from scheduler_project.http.validation import InstantField

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_IDEMPOTENCY_KEY_LENGTH = 255
_DIGITS = re.compile(r"[0-9]{1,19}")
_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")
PAGE_PARAMETERS = frozenset({"limit", "cursor"})


class JsonOnlyNegotiation(BaseContentNegotiation):
    """The API speaks only JSON: no ?format= override (which DRF would answer with a 404
    before authentication) and no 406 for other Accept headers."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class StrictAPIView(APIView):
    """Unknown query parameters are invalid_request, like unknown body fields.

    `query_parameters` maps a lower-case method to the parameter names it reads.
    """

    content_negotiation_class = JsonOnlyNegotiation
    permission_classes = []
    query_parameters: dict[str, frozenset[str]] = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication first: 401/403 precede 400
        method = request.method.lower()
        if not hasattr(self, method):
            return  # 405 follows
        allowed = self.query_parameters.get("get" if method == "head" else method, frozenset())
        for name in request.query_params:
            if name not in allowed:
                raise InvalidRequest(f"unknown query parameter {name[:100]!r}", field=name[:100])


class TenantAPIView(StrictAPIView):
    """Authenticated by a tenant token; `request.tenant` is the caller."""

    authentication_classes = [TenantTokenAuthentication]


class WorkerAPIView(StrictAPIView):
    """Authenticated by a worker token; `request.worker_token` is the caller."""

    authentication_classes = [WorkerTokenAuthentication]


def request_actor(request) -> Actor:
    """The author of a tenant request's change: its token, by name."""
    return Actor(AuthorKind.API, request.auth.name)


def query_integer(request, name: str, *, default: int | None, minimum: int, maximum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not _DIGITS.fullmatch(raw) or not minimum <= int(raw) <= maximum:
        raise InvalidRequest(f"{name} must be an integer from {minimum} to {maximum}", field=name)
    return int(raw)


def query_instant(request, name: str):
    """An optional instant query parameter, held to the same rules as instants in bodies."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        return InstantField().to_internal_value(raw)
    except serializers.ValidationError as exc:
        raise InvalidRequest(f"{name}: {exc.detail[0]}", field=name) from None


def query_limit(request) -> int:
    return query_integer(request, "limit", default=DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)


def query_cursor(request) -> str | None:
    raw = request.query_params.get("cursor")
    return raw or None


def idempotency_key(request) -> str | None:
    raw = request.headers.get("Idempotency-Key")
    if raw is None:
        return None
    if len(raw) > MAX_IDEMPOTENCY_KEY_LENGTH or not _PRINTABLE_ASCII.fullmatch(raw):
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters",
            field="Idempotency-Key",
        )
    return raw
