"""Object storage for result bytes: one small interface, two backends.

Objects are immutable: `put_new` never overwrites, and every read names an exact
version, so a stale attempt can leave an orphan but never change a canonical result.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver


DEFAULT_FILENAME = "result"
MAX_FILENAME_LENGTH = 200


@dataclass(frozen=True)
class StoredVersion:
    key: str
    version_id: str
    checksum: str  # "sha256:" + 64 lowercase hex
    size: int
    content_type: str


class ObjectExists(Exception):
    """put_new found the key already taken; the existing object is left untouched."""


class ObjectMissing(Exception):
    """No object with this key and version exists."""


class ObjectStore(Protocol):
    def ensure_ready(self) -> None: ...

    def put_new(self, key: str, data: bytes, content_type: str) -> StoredVersion: ...

    def put_new_file(self, key: str, source, content_type: str) -> StoredVersion:
        """``put_new`` for an ``objectstore.sources.FileSource``: read and stored in chunks,
        its checksum verified on the way (ChecksumMismatch, nothing stored, if it differs)."""
        ...

    def head(self, key: str, version_id: str) -> StoredVersion: ...

    def current(self, key: str) -> StoredVersion:
        """The version now stored under ``key`` (ObjectMissing if none): what an earlier,
        unacknowledged ``put_new`` of this key wrote."""
        ...

    def get(self, key: str, version_id: str) -> bytes: ...

    def delete(self, key: str, version_id: str) -> None:
        """Remove exactly this version for good; a version already gone counts as deleted."""
        ...

    def delete_many(self, items: list[tuple[str, str]]) -> list[Exception | None]:
        """``delete`` of each ``(key, version_id)``, batched where the backend can (S3: up to
        1000 versions a request). One answer per item, in order: None once it is deleted (or
        was already gone), else the error that item met; the other items are unaffected."""
        ...

    def download_url(
        self, key: str, version_id: str, expires_in: int, base_url: str, filename: str = DEFAULT_FILENAME
    ) -> str:
        """A link serving exactly this version as an attachment named `filename` (see `download_filename`)."""
        ...


def download_filename(name: str | None) -> str:
    """The name a download is saved under: a job's own file name when it is a plain one (no
    path, no control characters, at most 200 characters), else "result"."""
    if (
        not name
        or len(name) > MAX_FILENAME_LENGTH
        or name in {".", ".."}
        or any(c in name for c in '/\\"')
        or not name.isprintable()
        or name != name.strip()
    ):
        return DEFAULT_FILENAME
    return name


def check_key(key: str) -> str:
    """Reject keys that could escape the store root or mean different things per backend."""
    if not isinstance(key, str) or not key:
        raise ValueError("object key must be a non-empty string")
    if "\x00" in key:
        raise ValueError("object key must not contain NUL")
    if key.startswith("/"):
        raise ValueError("object key must be relative")
    # "a//b" and "a/./b" would name one file on disk but two objects in S3.
    if any(part in ("", ".", "..") for part in key.split("/")):
        raise ValueError(f"object key has an empty, '.' or '..' segment: {key!r}")
    if len(key.encode()) > 1024:
        raise ValueError("object key is longer than 1024 bytes")
    return key


def object_store_from_url(url: str, **kw) -> ObjectStore:
    """Build a store from `file:///abs/dir`, `s3://bucket` or `s3://bucket/prefix`.

    Keyword arguments go to the backend (S3: endpoint_url, region, public_endpoint_url).
    """
    parts = urlsplit(url)
    # Backends are imported lazily so a filesystem deployment never pays for importing boto3.
    if parts.scheme == "file":
        from objectstore.filesystem import FilesystemObjectStore

        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"file object store URL needs an absolute path: {url!r}")
        return FilesystemObjectStore(unquote(parts.path), **kw)
    if parts.scheme == "s3":
        from objectstore.s3 import S3ObjectStore

        if not parts.netloc:
            raise ValueError(f"s3 object store URL needs a bucket: {url!r}")
        return S3ObjectStore(parts.netloc, prefix=unquote(parts.path).strip("/"), **kw)
    raise ValueError(f"unsupported object store URL scheme: {url!r}")


@functools.cache
def get_object_store() -> ObjectStore:
    """The process-wide store from settings; `get_object_store.cache_clear()` rebuilds it."""
    url = settings.OBJECT_STORE_URL
    if url.startswith("s3://"):
        return object_store_from_url(
            url,
            endpoint_url=settings.S3_ENDPOINT_URL,
            region=settings.S3_REGION,
            public_endpoint_url=settings.S3_PUBLIC_ENDPOINT_URL,
        )
    return object_store_from_url(url)


@receiver(setting_changed)
def _rebuild_store_on_settings_change(setting, **kwargs):
    # Tests override these settings; a cached store would keep pointing at the old place.
    if setting in {"OBJECT_STORE_URL", "S3_ENDPOINT_URL", "S3_PUBLIC_ENDPOINT_URL", "S3_REGION"}:
        get_object_store.cache_clear()
