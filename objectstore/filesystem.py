"""Filesystem backend: the embedded default, one file per object under a root directory.

An object lives at ``<root>/<first two hex digits>/<sha256 of its key>.object``: 256
directories made once, so writing an object creates one directory entry and no directory.
Each object file starts with a one-line JSON header (key, content type, checksum, size)
followed by the raw bytes, so data and metadata become visible together in a single os.link.

Stores written before this layout kept an object at its key's own path (``runs/r/a/result``
as ``runs/r/a/result.object``); such objects are still read, deleted and never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import BinaryIO

from django.core import signing

from objectstore import DEFAULT_FILENAME, ObjectExists, ObjectMissing, StoredVersion, check_key, download_filename
from objectstore.sources import FileSource, VerifyingReader

# Appended to every object file name (in the earlier layout, so key "a" (file a.object) and
# key "a/b" (dir a) coexisted).
OBJECT_SUFFIX = ".object"
SHARDS = [f"{i:02x}" for i in range(256)]
TOKEN_SALT = "object-download"
MAX_HEADER_BYTES = 4096


class FilesystemObjectStore:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._shards_made = False

    def ensure_ready(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._make_shards()

    def _make_shards(self) -> None:
        """Create the 256 object directories (those missing), then make their entries durable."""
        if self._shards_made:
            return
        created = False
        for shard in SHARDS:
            try:
                (self.root / shard).mkdir(parents=True)
                created = True
            except FileExistsError:
                pass
        if created:
            _fsync_dir(self.root)
        self._shards_made = True

    def put_new(self, key: str, data: bytes, content_type: str) -> StoredVersion:
        return _raised(self.put_new_many([(key, data, content_type)])[0])

    def put_new_file(self, key: str, source: FileSource, content_type: str) -> StoredVersion:
        """Copy a local file in chunks; ChecksumMismatch (nothing stored) if its bytes changed."""
        return _raised(self.put_new_many([(key, source, content_type)])[0])

    def put_new_many(self, items: list[tuple[str, bytes | FileSource, str]]) -> list[StoredVersion | Exception]:
        """Write new objects ``(key, bytes or file source, content type)`` with one round of
        fsyncs: every object is written to a temporary file, then every file is fsynced,
        then each is linked under its name, then their directories are fsynced (the first
        commits the journal for all the links, the rest find nothing left to commit). Each
        object is judged on its own: its version, or what stopped it (ObjectExists,
        ChecksumMismatch, an OSError); a failed one leaves nothing stored."""
        self._make_shards()
        results: list[StoredVersion | Exception | None] = [None] * len(items)
        written = []  # (index, version, open temp file, final path)
        for i, (key, data, content_type) in enumerate(items):
            try:
                written.append((i, *self._write_temp(key, data, content_type)))
            except Exception as exc:
                results[i] = exc
        synced = []
        for i, stored, f, path in written:  # every fsync before any link: each would commit the links before it
            try:
                with f:
                    os.fsync(f.fileno())
                synced.append((i, stored, Path(f.name), path))
            except Exception as exc:
                results[i] = exc
                Path(f.name).unlink(missing_ok=True)
        directories = set()
        for i, stored, temp, path in synced:
            try:
                legacy = self._legacy_path(stored.key)
                if legacy and os.path.lexists(legacy):  # written under the earlier layout
                    raise FileExistsError(stored.key)
                # link (unlike rename) refuses to replace an existing name: that is the exclusive create,
                # and the final name only ever points at a complete, fsynced file.
                os.link(temp, path)
                results[i] = stored
                directories.add(path.parent)
            except FileExistsError:
                results[i] = ObjectExists(stored.key)
            except Exception as exc:
                results[i] = exc
            finally:
                temp.unlink(missing_ok=True)
        for directory in directories:
            _fsync_dir(directory)
        return results

    def _write_temp(self, key: str, data: bytes | FileSource, content_type: str):
        """(version, the temporary file holding it, still open and not yet fsynced, final path)."""
        if isinstance(data, FileSource):
            digest = data.checksum.removeprefix("sha256:")
            stored = StoredVersion(key, digest, data.checksum, data.size, content_type)
        else:
            digest = hashlib.sha256(data).hexdigest()
            stored = StoredVersion(key, digest, "sha256:" + digest, len(data), content_type)
        path = self._path(key)
        header = json.dumps(
            {"key": key, "content_type": content_type, "sha256": stored.version_id, "size": stored.size})
        temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
        f = open(temp, "xb")
        try:
            f.write(header.encode() + b"\n")
            if isinstance(data, FileSource):
                with open(data.path, "rb") as src:
                    reader = VerifyingReader(data, src)
                    for chunk in reader.chunks():
                        f.write(chunk)
                    reader.verify()
            else:
                f.write(data)
            f.flush()
        except BaseException:
            f.close()
            temp.unlink(missing_ok=True)
            raise
        return stored, f, path

    def head(self, key: str, version_id: str) -> StoredVersion:
        stored, f = self.open_version(key, version_id)
        f.close()
        return stored

    def get(self, key: str, version_id: str) -> bytes:
        stored, f = self.open_version(key, version_id)
        with f:
            return f.read()

    def current(self, key: str) -> StoredVersion:
        _, f = self._open(key, missing=key)
        with f:
            return _read_header(key, f)

    def open_version(self, key: str, version_id: str) -> tuple[StoredVersion, BinaryIO]:
        """Open exactly this version, positioned at its first data byte (for streaming)."""
        return self._open_version(key, version_id)[1:]

    def _open_version(self, key: str, version_id: str) -> tuple[Path, StoredVersion, BinaryIO]:
        path, f = self._open(key, missing=f"{key}@{version_id}")
        try:
            stored = _read_header(key, f)
        except Exception:
            f.close()
            raise
        if stored.version_id != version_id:
            f.close()
            raise ObjectMissing(f"{key}@{version_id}")
        return path, stored, f

    def _open(self, key: str, missing: str) -> tuple[Path, BinaryIO]:
        """The file holding ``key``, open at its header: under this layout's name, else under
        the earlier layout's; ObjectMissing(missing) when neither exists."""
        for path in filter(None, (self._path(key), self._legacy_path(key))):
            try:
                return path, open(path, "rb")
            except (FileNotFoundError, NotADirectoryError):
                pass
        raise ObjectMissing(missing)

    def delete(self, key: str, version_id: str) -> None:
        try:
            path, _, f = self._open_version(key, version_id)
        except ObjectMissing:
            return
        f.close()
        # Versions are content-addressed; concurrent delete+re-put of one key is serialized by
        # the object registry row lock, so the file checked above is the one unlinked here.
        path.unlink(missing_ok=True)

    def delete_many(self, items: list[tuple[str, str]]) -> list[Exception | None]:
        """``delete`` of each, one file at a time (a local file system has no batch to send)."""
        answers: list[Exception | None] = []
        for key, version_id in items:
            try:
                self.delete(key, version_id)
            except Exception as exc:  # noqa: BLE001 - reported for its item; the rest go on
                answers.append(exc)
            else:
                answers.append(None)
        return answers

    def download_url(
        self, key: str, version_id: str, expires_in: int, base_url: str, filename: str = DEFAULT_FILENAME
    ) -> str:
        check_key(key)
        token = make_download_token(key, version_id, expires_at=time.time() + expires_in, filename=filename)
        return f"{base_url.rstrip('/')}/api/v1/objects/{token}"

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(check_key(key).encode()).hexdigest()
        return self.root / digest[:2] / (digest + OBJECT_SUFFIX)

    def _legacy_path(self, key: str) -> Path | None:
        """Where the earlier layout kept ``key``: its own path, one directory per segment
        (None for a key that layout could not hold)."""
        *dirs, name = key.split("/")
        if any(part.endswith(OBJECT_SUFFIX) for part in dirs):
            return None
        return self.root.joinpath(*dirs, name + OBJECT_SUFFIX)


def make_download_token(key: str, version_id: str, expires_at: float, filename: str = DEFAULT_FILENAME) -> str:
    """A signed, URL-safe token naming one object version and the file name it downloads as;
    valid until `expires_at` (epoch seconds)."""
    payload = {"k": key, "v": version_id, "e": int(expires_at), "f": download_filename(filename)}
    return signing.dumps(payload, salt=TOKEN_SALT, compress=True)


def read_download_link(token: str, now: float) -> tuple[str, str, str]:
    """Return (key, version_id, filename); raise signing.BadSignature if tampered or expired."""
    payload = signing.loads(token, salt=TOKEN_SALT)
    if now > payload["e"]:
        raise signing.SignatureExpired("download link expired")
    return payload["k"], payload["v"], download_filename(payload.get("f"))


def read_download_token(token: str, now: float) -> tuple[str, str]:
    """Return (key, version_id) of a download link (see `read_download_link`)."""
    key, version_id, _ = read_download_link(token, now)
    return key, version_id


def _read_header(key: str, f: BinaryIO) -> StoredVersion:
    meta = json.loads(f.readline(MAX_HEADER_BYTES))
    return StoredVersion(key, meta["sha256"], "sha256:" + meta["sha256"], meta["size"], meta["content_type"])


def _raised(result: StoredVersion | Exception) -> StoredVersion:
    if isinstance(result, Exception):
        raise result
    return result


def _fsync_dir(directory: Path) -> None:
    # Makes the new directory entry durable, not just the file contents.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
