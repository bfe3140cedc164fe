"""Result bytes that live in a local file: uploaded in chunks, never read whole into memory.

A job's output is either ``bytes`` or a ``FileSource``. Both backends store a file source
chunk by chunk (S3 as a multipart upload), computing its SHA-256 again on the way and
refusing to publish bytes that differ from the checksum the source was created with.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK_BYTES = 8 * 1024 * 1024  # also the S3 part size: at least S3's 5 MiB minimum


class ChecksumMismatch(Exception):
    """The file's bytes changed between computing its checksum and uploading it."""


@dataclass(frozen=True)
class FileSource:
    path: str
    checksum: str  # "sha256:" + 64 lowercase hex
    size: int

    @classmethod
    def of(cls, path: str | os.PathLike) -> FileSource:
        """A file source whose checksum and size are read from the file, in chunks."""
        digest, size = hashlib.sha256(), 0
        with open(path, "rb") as f:
            for chunk in read_chunks(f):
                digest.update(chunk)
                size += len(chunk)
        return cls(os.fspath(path), "sha256:" + digest.hexdigest(), size)


def read_chunks(f: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    while chunk := f.read(size):
        yield chunk


def checksum_of(data: bytes | FileSource) -> str:
    """The "sha256:<hex>" checksum of result bytes, whichever form they take."""
    if isinstance(data, FileSource):
        return data.checksum
    return "sha256:" + hashlib.sha256(data).hexdigest()


def put_new_from(store, key: str, data: bytes | FileSource, content_type: str):
    """``store.put_new`` for bytes, ``store.put_new_file`` (chunked) for a file source."""
    if isinstance(data, FileSource):
        return store.put_new_file(key, data, content_type)
    return store.put_new(key, data, content_type)


class VerifyingReader:
    """Chunks of a file source, hashed as they are read; ``verify()`` after the last one."""

    def __init__(self, source: FileSource, f: BinaryIO):
        self.source, self.f = source, f
        self.digest, self.size = hashlib.sha256(), 0

    def chunks(self, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        for chunk in read_chunks(self.f, size):
            self.digest.update(chunk)
            self.size += len(chunk)
            yield chunk

    def verify(self) -> None:
        actual = "sha256:" + self.digest.hexdigest()
        if actual != self.source.checksum or self.size != self.source.size:
            raise ChecksumMismatch(
                f"{self.source.path} changed while it was uploaded: {self.size} bytes, {actual}, "
                f"expected {self.source.size} bytes, {self.source.checksum}"
            )
