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

CHUNK_BYTES = 8 * 1024 * 1024  # the S3 part size: at least S3's 5 MiB minimum
BLOCK_BYTES = 64 * 1024  # what an upload reads of a file at once (and all it holds of it)


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


def read_chunks(f: BinaryIO, size: int = BLOCK_BYTES) -> Iterator[bytes]:
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

    def chunks(self, size: int = BLOCK_BYTES) -> Iterator[bytes]:
        for chunk in read_chunks(self.f, size):
            self.digest.update(chunk)
            self.size += len(chunk)
            yield chunk

    def parts(self, size: int = CHUNK_BYTES) -> Iterator[tuple[FilePart, bytes]]:
        """The file in parts of ``size`` bytes, each with its SHA-256 digest, read in blocks:
        what an S3 multipart upload sends, never holding a part in memory."""
        while True:
            start, digest = self.size, hashlib.sha256()
            while (left := size - (self.size - start)) and (block := self.f.read(min(BLOCK_BYTES, left))):
                digest.update(block)
                self.digest.update(block)
                self.size += len(block)
            if self.size == start:
                return
            yield FilePart(self.f, start, self.size - start), digest.digest()
            self.f.seek(self.size)  # sending the part moved the file's position

    def verify(self) -> None:
        actual = "sha256:" + self.digest.hexdigest()
        if actual != self.source.checksum or self.size != self.source.size:
            raise ChecksumMismatch(
                f"{self.source.path} changed while it was uploaded: {self.size} bytes, {actual}, "
                f"expected {self.source.size} bytes, {self.source.checksum}"
            )


class FilePart:
    """Bytes ``[start, start + size)`` of an open file as a seekable stream of known length, the
    body botocore reads in blocks (once for the signature, once for the request, again on a
    retry), so a part is never held whole. Positions are relative to the part's start."""

    def __init__(self, f: BinaryIO, start: int, size: int):
        self.f, self.start, self.size, self.position = f, start, size, 0

    def __len__(self) -> int:
        return self.size

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.size}[whence]
        self.position = min(max(base + offset, 0), self.size)
        return self.position

    def read(self, size: int | None = -1) -> bytes:
        left = self.size - self.position
        self.f.seek(self.start + self.position)
        data = self.f.read(left if size is None or size < 0 else min(size, left))
        self.position += len(data)
        return data
