"""What a job produces: bytes, a file, or a streamed output written through ``ctx.output()``.

A file and a streamed output are uploaded in chunks (objectstore.sources), so a 2 GB export
never sits in the worker's memory. A streamed output goes to a local spool file (under
``tempfile.gettempdir()``, i.e. ``TMPDIR``) whose SHA-256 is computed while it is written;
the runtime deletes the spool once the attempt is over. Every form is held to one cap,
RESULT_MAX_BYTES (runs.authority.staging.check_result_size): past it the job fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from dataclasses import dataclass

from objectstore.sources import FileSource
from runs.authority.staging import check_result_size

DEFAULT_CONTENT_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class JobOutput:
    """``data`` bytes, or the file at ``path`` (read in chunks when uploaded, never whole)."""

    data: bytes | None = None
    content_type: str = DEFAULT_CONTENT_TYPE
    filename: str = ""
    path: str | None = None
    checksum: str | None = None  # "sha256:<hex>" of the file at path, once known
    size: int | None = None

    @classmethod
    def file(cls, path: str | os.PathLike, content_type: str = DEFAULT_CONTENT_TYPE, filename: str = "") -> JobOutput:
        """The file at ``path`` as the result; its downloads are named ``filename`` (default: the file's name)."""
        path = os.fspath(path)
        return cls(None, content_type, filename or os.path.basename(path), path=path)

    def upload_source(self) -> bytes | FileSource:
        """What staging (workers.uploads) uploads: the bytes, or the file as a FileSource."""
        if self.path is None:
            return self.data
        if self.checksum is None or self.size is None:
            return FileSource.of(self.path)
        return FileSource(self.path, self.checksum, self.size)


class OutputWriter:
    """A streamed output's ``write()``: bytes (or text, written as UTF-8) go to a spool file
    and into its SHA-256 as they come, in blocks of up to 64 KiB."""

    BLOCK_BYTES = 64 * 1024

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="scheduler-output-")
        self._file = os.fdopen(fd, "wb")
        self._digest = hashlib.sha256()
        self._block = bytearray()  # many small writes (a CSV row each) cost one hash update per block
        self.size = 0

    def write(self, chunk: bytes | bytearray | memoryview | str) -> int:
        """Write `chunk`; ResultTooLarge (the job fails) before the output would pass
        RESULT_MAX_BYTES, so the spool never holds more."""
        data = chunk.encode() if isinstance(chunk, str) else chunk
        check_result_size(self.size + len(self._block) + len(data))
        self._block += data
        if len(self._block) >= self.BLOCK_BYTES:
            self._flush_block()
        return len(chunk)

    def writelines(self, chunks) -> None:
        for chunk in chunks:
            self.write(chunk)

    def close(self) -> None:
        if not self._file.closed:
            self._flush_block()
            self._file.close()

    def _flush_block(self) -> None:
        self._file.write(self._block)
        self._digest.update(self._block)
        self.size += len(self._block)
        self._block.clear()

    @property
    def checksum(self) -> str:
        return "sha256:" + self._digest.hexdigest()

    def as_output(self, content_type: str, filename: str) -> JobOutput:
        return JobOutput(None, content_type, filename, path=self.path, checksum=self.checksum, size=self.size)


def resolve_output(returned, streamed: JobOutput | None) -> JobOutput:
    """The job's output from what its function returned and what it wrote through
    ``ctx.output()``; TypeError for anything else (the run fails, it is the job's bug)."""
    if streamed is not None:
        if returned is not None and not isinstance(returned, OutputWriter):
            raise TypeError("the job wrote an output through ctx.output() and returned another one")
        return streamed
    if isinstance(returned, (bytes, bytearray, memoryview)):
        check_result_size(len(returned))
        return JobOutput(bytes(returned))
    if isinstance(returned, os.PathLike):
        returned = JobOutput.file(returned)
    if not isinstance(returned, JobOutput):
        raise TypeError(
            "a job returns bytes, a pathlib.Path or a JobOutput, or writes its output with ctx.output(); "
            f"this one returned {type(returned).__name__}"
        )
    if (returned.data is None) == (returned.path is None):
        raise TypeError("a JobOutput holds either data or a path")
    if returned.path is not None and (returned.checksum is None or returned.size is None):
        source = FileSource.of(returned.path)  # a missing file fails the job, not the upload
        returned = dataclasses.replace(returned, checksum=source.checksum, size=source.size)
    check_result_size(len(returned.data) if returned.data is not None else returned.size)
    return returned
