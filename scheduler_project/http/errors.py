"""Every error leaves the API with the contract body:
``{"error": {"code": "...", "message": "...", "details": {...}}}``.

`api_exception_handler` is DRF's EXCEPTION_HANDLER; the ``handler*`` views are Django's
error views for everything that never reaches a DRF view (unknown URLs, oversize or
malformed requests rejected by Django itself, uncaught exceptions).
"""

import functools
import logging

from django.db import InterfaceError, OperationalError
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from psycopg_pool import PoolTimeout
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import set_rollback

from kernel.errors import DomainError, RevisionConflict

logger = logging.getLogger(__name__)
READ_METHODS = ("GET", "HEAD")

# DRF exceptions that have no row in the contract's table keep their HTTP status and
# get a stable code of their own.
_DRF_CODES = {
    drf.ParseError: (400, "invalid_request"),
    drf.ValidationError: (400, "invalid_request"),
    drf.NotAuthenticated: (401, "unauthenticated"),
    drf.AuthenticationFailed: (401, "unauthenticated"),
    drf.PermissionDenied: (403, "forbidden"),
    drf.NotFound: (404, "not_found"),
    drf.MethodNotAllowed: (405, "method_not_allowed"),
    drf.NotAcceptable: (406, "not_acceptable"),
    drf.UnsupportedMediaType: (415, "unsupported_media_type"),
    drf.Throttled: (429, "rate_limited"),
}


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def first_validation_error(detail, path=()) -> tuple[str | None, str]:
    """(dotted field path, message) of the first error in a DRF ValidationError detail;
    the message is the ErrorDetail itself, so its code stays readable."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            sub = path if key == "non_field_errors" else (*path, str(key))
            return first_validation_error(value, sub)
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)) and value:
                return first_validation_error(value, (*path, str(index)))
            if value:
                return first_validation_error(value, path)
    return (".".join(path) or None, detail if isinstance(detail, str) else str(detail))


def domain_error_body(exc: DomainError) -> dict:
    details = dict(exc.details)
    if isinstance(exc, RevisionConflict):
        current = getattr(exc, "current", None)
        if current is not None and not isinstance(current, dict):
            from scheduler_project.http.representations import schedule_detail_representation

            current = schedule_detail_representation(current)
        if current is not None:
            details["current"] = current
    return error_body(exc.code, exc.message, details)


# The authority is unreachable or refused for a moment (restart, failover, connection
# limit, lock timeout, no pooled connection free within DATABASE_POOL_TIMEOUT_SECONDS):
# nothing was done, and the same request may be sent again. Django reports a pool timeout
# as its OperationalError; the driver's own class is named too, wherever it surfaces.
UNAVAILABLE_RETRY_AFTER_SECONDS = 1
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError, PoolTimeout)


def exception_body(exc) -> tuple[int, dict, dict] | None:
    """(status, body, headers) for any exception the API knows how to report, else None."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        body = error_body("unavailable", "the database cannot be reached right now; retry")
        return 503, body, {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}
    if isinstance(exc, DomainError):
        headers = {"WWW-Authenticate": 'Bearer realm="api"'} if exc.status == 401 else {}
        if exc.status == 503:
            headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_SECONDS)
        return exc.status, domain_error_body(exc), headers
    if isinstance(exc, RequestDataTooBig):
        return 400, error_body("invalid_request", "request body too large"), {}
    if isinstance(exc, SuspiciousOperation):
        return 400, error_body("invalid_request", "bad request"), {}
    if isinstance(exc, Http404):
        return 404, error_body("not_found", "not found"), {}
    if isinstance(exc, DjangoPermissionDenied):
        return 403, error_body("forbidden", "forbidden"), {}
    if isinstance(exc, drf.APIException):
        status, code = exc.status_code, exc.default_code
        for cls, (mapped_status, mapped_code) in _DRF_CODES.items():
            if isinstance(exc, cls):
                status, code = mapped_status, mapped_code
                break
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = "%d" % exc.wait
        details = {}
        if isinstance(exc, drf.ValidationError):
            field, message = first_validation_error(exc.detail)
            if field:
                details["field"] = field
        else:
            message = str(exc.detail) if not isinstance(exc.detail, (list, dict)) else code
        return status, error_body(code, message, details), headers
    return None


def api_exception_handler(exc, context):
    """DRF EXCEPTION_HANDLER. Returns None for unexpected errors so they reach handler500."""
    reported = exception_body(exc)
    if reported is None:
        return None
    status, body, headers = reported
    set_rollback()
    return Response(body, status=status, headers=headers)


# --- Django error views (handler400/403/404/500) ------------------------------------------


def bad_request(request, exception=None):
    message = "request body too large" if isinstance(exception, RequestDataTooBig) else "bad request"
    return JsonResponse(error_body("invalid_request", message), status=400)


def permission_denied(request, exception=None):
    return JsonResponse(error_body("forbidden", "forbidden"), status=403)


def page_not_found(request, exception=None):
    return JsonResponse(error_body("not_found", "not found"), status=404)


def server_error(request):
    return JsonResponse(error_body("internal_error", "internal server error"), status=500)


def read_only(view):
    """`view` for GET and HEAD only, for the views outside DRF (downloads, /metrics, the
    served docs): any other method is 405 with `Allow` and the contract's body. They take no
    cookie credential, so CSRF has nothing to protect, and its HTML page never answers."""

    @functools.wraps(view)
    def guarded(request, *args, **kwargs):
        if request.method not in READ_METHODS:
            response = JsonResponse(
                error_body("method_not_allowed", f'Method "{request.method[:20]}" not allowed.'), status=405
            )
            response["Allow"] = ", ".join(READ_METHODS)
            return response
        return view(request, *args, **kwargs)

    return csrf_exempt(guarded)


class DatabaseUnavailableMiddleware:
    """Views outside the API (admin, /metrics, downloads) answer 503 with Retry-After too
    when the database cannot be reached, never 500; the API does so in its handler."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, UNAVAILABLE_ERRORS):
            return None
        status, body, headers = exception_body(exception)
        response = JsonResponse(body, status=status)
        for name, value in headers.items():
            response[name] = value
        return response
