"""botocore's data files, read into the least memory an S3 client needs.

botocore reads its JSON data into OrderedDicts and keeps them for the life of the process:
all of ``endpoints.json`` (every AWS service in every partition, 1.2 MB of JSON; 9 MiB at the
peak of parsing it, 5 MiB of which the allocator keeps) and the S3 model with its
documentation (1 MB of its 1.4 MB). This loader reads plain dicts, empties the documentation
text (only docstrings and generated docs read it), and keeps of ``endpoints.json`` the
services the store's session talks to, parsing every other service's entry on its own and
dropping it at once.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from json.decoder import scanstring

from botocore.loaders import JSONFileLoader

# S3, and the services botocore's own credential providers call (assume role, web identity, SSO).
ENDPOINT_SERVICES = frozenset({"s3", "sts", "sso", "sso-oidc"})

_BLANKS = re.compile(r"[ \t\n\r]*")
_DROPPED = object()


class SlimJSONFileLoader(JSONFileLoader):
    """botocore's file loader (``Loader(file_loader=...)``), reading as described above."""

    def load_file(self, file_path):
        for suffix, open_file in ((".json", open), (".json.gz", gzip.open)):
            if os.path.isfile(file_path + suffix):
                with open_file(file_path + suffix, "rb") as f:
                    text = f.read().decode("utf-8")
                if os.path.basename(file_path) == "endpoints":
                    return endpoints_with(text, ENDPOINT_SERVICES)
                return json.loads(text, object_hook=_without_documentation)
        return None


def _without_documentation(node: dict) -> dict:
    # Emptied, not removed: botocore reads some of them as required keys. A shape member could
    # be named "documentation": its value is a dict, never a string.
    if isinstance(node.get("documentation"), str):
        node["documentation"] = ""
    return node


def endpoints_with(text: str, services: frozenset) -> dict:
    """``json.loads(text)`` of an endpoints.json, with only ``services`` in each partition."""
    decoder = json.JSONDecoder()

    def value(key, pos):
        return decoder.raw_decode(text, pos)

    def service(key, pos):
        entry, end = decoder.raw_decode(text, pos)
        return (entry if key in services else _DROPPED), end

    def partition(pos):
        return _object(text, pos, lambda key, at: _object(text, at, service) if key == "services" else value(key, at))

    try:
        return _object(text, 0, lambda key, at: _array(text, at, partition) if key == "partitions" else value(key, at))[0]
    except ValueError:  # a layout this reader does not know: botocore gets the file whole
        return json.loads(text)


def _next(text: str, pos: int) -> tuple[str, int]:
    """The first character at or after ``pos`` that is not a blank, and where it is."""
    pos = _BLANKS.match(text, pos).end()
    return text[pos:pos + 1], pos


def _expect(char: str, expected: str, pos: int) -> None:
    if char != expected:
        raise ValueError(f"expected {expected!r} at {pos}, found {char!r}")


def _object(text: str, pos: int, member) -> tuple[dict, int]:
    """The JSON object at ``pos`` and the position after it; ``member(key, pos)`` parses each
    value (``(value, end)``; a value of _DROPPED leaves the member out)."""
    char, pos = _next(text, pos)
    _expect(char, "{", pos)
    result = {}
    char, pos = _next(text, pos + 1)
    while char != "}":
        _expect(char, '"', pos)
        key, pos = scanstring(text, pos + 1)
        char, pos = _next(text, pos)
        _expect(char, ":", pos)
        value, pos = member(key, _next(text, pos + 1)[1])
        if value is not _DROPPED:
            result[key] = value
        char, pos = _next(text, pos)
        if char == ",":
            char, pos = _next(text, pos + 1)
        else:
            _expect(char, "}", pos)
    return result, pos + 1


def _array(text: str, pos: int, item) -> tuple[list, int]:
    """The JSON array at ``pos`` and the position after it; ``item(pos)`` parses each element."""
    char, pos = _next(text, pos)
    _expect(char, "[", pos)
    result = []
    char, pos = _next(text, pos + 1)
    while char != "]":
        value, pos = item(pos)
        result.append(value)
        char, pos = _next(text, pos)
        if char == ",":
            char, pos = _next(text, pos + 1)
        else:
            _expect(char, "]", pos)
    return result, pos + 1
