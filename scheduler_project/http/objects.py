"""Serves filesystem-store downloads: the signed token in the URL is the only credential.
Mounted through `read_only` (GET and HEAD; any other method is the contract's 405)."""

from __future__ import annotations

import time

from django.core import signing
from django.http import FileResponse, JsonResponse

from kernel.errors import DomainError, Forbidden, NotFound
from objectstore import ObjectMissing, get_object_store
from objectstore.filesystem import FilesystemObjectStore, read_download_link


def object_download(request, token: str):
    try:
        key, version_id, filename = read_download_link(token, now=time.time())
    except signing.BadSignature:  # also covers SignatureExpired
        return _error(Forbidden("download link is invalid or expired"))

    store = get_object_store()
    # Tokens are only minted by the filesystem backend; S3 links go straight to S3.
    if not isinstance(store, FilesystemObjectStore):
        return _error(NotFound("object not found"))
    try:
        stored, f = store.open_version(key, version_id)
    except (ObjectMissing, ValueError):
        return _error(NotFound("object not found"))

    # The job's own file name, carried by the signed link (never the on-disk "result.object").
    response = FileResponse(f, content_type=stored.content_type, as_attachment=True, filename=filename)
    # A worker chose the type and the bytes: whatever they are (an HTML page, a script), the
    # browser saves them, never renders or runs them on the API's origin.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    response["ETag"] = f'"{stored.version_id}"'
    response["X-Checksum-Sha256"] = stored.version_id
    response["Cache-Control"] = "private, no-transform"
    return response


def _error(exc: DomainError) -> JsonResponse:
    return JsonResponse(
        {"error": {"code": exc.code, "message": exc.message, "details": exc.details}}, status=exc.status
    )
