"""Uploading staged outputs: the object store's network I/O of staging, on the worker side.
The authority registers each upload before it begins and records its version after it
(runs.authority.staging); this module writes the bytes in between, outside any transaction,
on the process's upload threads, and removes an upload that cleanup made unpublishable.
"""

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from objectstore import ObjectExists, StoredVersion, get_object_store
from objectstore.sources import FileSource, checksum_of, put_new_from
from runs import authority, metrics
from runs.models import StoredObject
from kernel.errors import InvalidState

log = logging.getLogger(__name__)

UPLOAD_THREADS = 8


def stage_result(
    *, run_id: str, attempt_id: str, fence: int, data: bytes | FileSource, content_type: str, filename: str = "",
    worker_token=None,
) -> StoredObject:
    """Stage one attempt's output (stage_results); raises what refused it."""
    [staged] = stage_results([authority.Upload(run_id, attempt_id, fence, data, content_type, filename, worker_token)])
    if isinstance(staged, Exception):
        raise staged
    return staged


def stage_results(uploads: list[authority.Upload]) -> list[StoredObject | Exception]:
    """Register every upload (staged) before it begins, upload outside any transaction, then
    record the versions and the jobs' file names. Repeating the same bytes returns the same
    object, also when the version of an earlier try was written but never recorded.

    Per upload, in order: its staged object, or the exception that refused it (ResultTooLarge,
    NotFound, Forbidden, StaleFence, QuotaExceeded, InvalidState, or the store's error). A
    database error raises.
    """
    answers, to_write = authority.stage_register(uploads)
    written = []
    for i, version in zip(to_write, _upload_all([uploads[i] for i in to_write])):
        if isinstance(version, Exception):  # the store's trouble, or a different result under this key
            answers[i] = version
        else:
            written.append((i, uploads[i], version))
    for key, version_id in authority.stage_record(answers, written):
        _remove(key, version_id)
    return answers


def _upload_all(uploads: list[authority.Upload]) -> list[StoredVersion | Exception]:
    """Each upload's written version, or the exception that stopped it; none touches the
    database. A store that writes a group at once (the file store: one round of fsyncs)
    gets the group; with any other (S3: a request per object) the uploads run side by side
    on the process's upload threads, each waiting on the store, not on this process."""
    store = get_object_store()
    if hasattr(store, "put_new_many"):
        results = store.put_new_many([(upload.key, upload.data, upload.content_type) for upload in uploads])
    else:
        def put(upload):
            return _caught(put_new_from, store, upload.key, upload.data, upload.content_type)

        results = list(_upload_pool().map(put, uploads) if len(uploads) > 1 else map(put, uploads))
    return [_caught(_settled, store, upload, result) for upload, result in zip(uploads, results)]


_pool_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): a forked child starts its own


def _upload_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(UPLOAD_THREADS, thread_name_prefix="upload"))
        return _pool[1]


def _caught(call, *args):
    try:
        return call(*args)
    except Exception as exc:
        return exc


def _settled(store, upload: authority.Upload, result: StoredVersion | Exception) -> StoredVersion:
    """The version an upload wrote. If an earlier try already wrote this key but its version
    never got recorded (the database failed in between), the same bytes adopt that version."""
    if isinstance(result, ObjectExists):
        written = store.current(upload.key)
        if written.checksum != checksum_of(upload.data) or written.content_type != upload.content_type:
            raise InvalidState("this attempt already uploaded a different result; objects are immutable")
        return written
    if isinstance(result, Exception):
        metrics.PUBLICATION_FAILURES.labels("upload").inc()
        raise result
    return result


def _remove(key: str, version_id: str) -> None:
    """Cleanup took the row while we uploaded: this version can never be published."""
    try:
        get_object_store().delete(key, version_id)
    except Exception:  # at worst one unreferenced object remains for the orphan sweep
        log.warning("could not remove unpublishable upload %s", key, exc_info=True)
