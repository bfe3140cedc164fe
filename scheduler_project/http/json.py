"""Strict JSON request bodies.

The body must be UTF-8 JSON whose top level is an object. NaN/Infinity (and numbers that
overflow to them), duplicate keys, absurd nesting and oversize bodies are all rejected as
400 invalid_request instead of reaching a service in some half-parsed shape.
"""

import json
import math

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from kernel.errors import InvalidRequest

MAX_NESTING = 32
JSON_CONTENT_TYPES = ("application/json",)


class _Reject(ValueError):
    pass


def _reject_constant(name):
    raise _Reject(f"{name} is not valid JSON")


def _parse_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Reject(f"number out of range: {text[:40]}")
    return value


def _unique_object(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise _Reject(f"duplicate key {key[:100]!r}")
        obj[key] = value
    return obj


def _check_structure(value, limit):
    """Reject nesting deeper than `limit` and strings the database cannot store
    (NUL, lone surrogates), naming the offending field by its dotted path. Iterative, so
    hostile input cannot exhaust the stack."""
    stack = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if isinstance(item, dict):
            for key in item:
                _check_text(key, (*path, key))
            children = [(child, (*path, key)) for key, child in item.items()]
        elif isinstance(item, list):
            children = [(child, (*path, str(index))) for index, child in enumerate(item)]
        else:
            continue
        if depth > limit:
            raise InvalidRequest("malformed JSON: nested too deeply")
        stack.extend((child, depth + 1, child_path) for child, child_path in children)


def _check_text(text: str, path: tuple):
    """`path` leads to `text`; its keys were checked before, so only a valid one is named."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("strings must be valid Unicode (no lone surrogates)") from None
    if "\x00" in text:
        raise InvalidRequest("strings must not contain NUL characters", field=".".join(path)[:200] or None)


def _check_content_type(request):
    content_type = request.META.get("CONTENT_TYPE", "")
    if not content_type:
        return  # tolerated: the body is still parsed strictly as JSON
    media_type, _, params = content_type.partition(";")
    media_type = media_type.strip().lower()
    if media_type not in JSON_CONTENT_TYPES and not media_type.endswith("+json"):
        raise InvalidRequest("Content-Type must be application/json", field="Content-Type")
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise InvalidRequest("JSON bodies must be UTF-8", field="Content-Type")


def read_body(request) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        raise InvalidRequest(
            "request body too large", details={"maxBytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
        ) from None


def loads_object(raw: bytes) -> dict:
    """Parse `raw` as a strict JSON object or raise InvalidRequest."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("request body is not valid UTF-8") from None
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            object_pairs_hook=_unique_object,
        )
    except _Reject as exc:
        raise InvalidRequest(f"malformed JSON: {exc}") from None
    except RecursionError:
        raise InvalidRequest("malformed JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int strings beyond the digit limit
        raise InvalidRequest(f"malformed JSON: {str(exc)[:200]}") from None
    if not isinstance(value, dict):
        raise InvalidRequest("request body must be a JSON object")
    _check_structure(value, MAX_NESTING)
    return value


def json_object_body(request, *, allow_empty: bool = False) -> dict:
    """The request's body as a dict. An empty body is {} when `allow_empty`."""
    raw = read_body(request)
    if not raw.strip() and allow_empty:
        return {}
    if not raw.strip():
        raise InvalidRequest("request body must be a JSON object")
    _check_content_type(request)
    return loads_object(raw)
