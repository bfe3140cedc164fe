"""Staging: an attempt's output registered, uploaded under its attempt-scoped key, and its
version recorded, before the fenced completion (runs/authority/completion.py) may publish it.

A worker process stages the outputs of the attempts it finished together: one statement
registers them all, each is uploaded outside any transaction, one statement records the
versions. Each upload is still judged on its own: one that is refused fails alone.
"""

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from objectstore import ObjectExists, StoredVersion, download_filename, get_object_store
from objectstore.sources import FileSource, checksum_of, put_new_from
from runs import metrics
from runs.authority.ownership import current_attempt
from runs.authority.sql import record_uploads, register_uploads_if_owned
from runs.models import ObjectState, Run, StoredObject
from schedules.models import Tenant
from scheduler_project.clock import authority_now
from scheduler_project.errors import DomainError, InvalidState, NotFound, QuotaExceeded, ResultTooLarge

log = logging.getLogger(__name__)

UPLOAD_THREADS = 8


def result_key(run_id: str, attempt_id: str) -> str:
    """Immutable, attempt-scoped name: a stale attempt can only ever write its own orphan."""
    return f"runs/{run_id}/{attempt_id}/result"


@dataclass
class Upload:
    run_id: str
    attempt_id: str
    fence: int
    data: bytes | FileSource  # a file source for an output too large to hold in memory
    content_type: str
    filename: str = ""
    worker_token: object = None
    key: str = field(init=False)

    def __post_init__(self):
        self.key = result_key(self.run_id, self.attempt_id)
        self.content_type = self.content_type[:200]

    @property
    def worker_token_id(self):
        return self.worker_token.id if self.worker_token is not None else None


def check_result_size(size: int) -> None:
    """One cap on every result, whichever way it arrives (a worker's HTTP upload, a job's
    bytes or file, a streamed output as it is written): ResultTooLarge past RESULT_MAX_BYTES."""
    limit = settings.RESULT_MAX_BYTES
    if size > limit:
        raise ResultTooLarge(f"result too large: more than RESULT_MAX_BYTES ({limit} bytes)",
                             details={"maxBytes": limit})


def stage_result(
    *, run_id: str, attempt_id: str, fence: int, data: bytes | FileSource, content_type: str, filename: str = "",
    worker_token=None,
) -> StoredObject:
    """Stage one attempt's output (stage_results); raises what refused it."""
    [staged] = stage_results([Upload(run_id, attempt_id, fence, data, content_type, filename, worker_token)])
    if isinstance(staged, Exception):
        raise staged
    return staged


def stage_results(uploads: list[Upload]) -> list[StoredObject | Exception]:
    """Register every upload (staged) before it begins, upload outside any transaction, then
    record the versions and the jobs' file names. Repeating the same bytes returns the same
    object, also when the version of an earlier try was written but never recorded.

    Per upload, in order: its staged object, or the exception that refused it (ResultTooLarge,
    NotFound, Forbidden, StaleFence, QuotaExceeded, InvalidState, or the store's error). A
    database error raises.
    """
    answers: list[StoredObject | Exception | None] = [_too_large(upload) for upload in uploads]
    registered = register_uploads_if_owned([upload for upload, refused in zip(uploads, answers) if refused is None])
    to_write: list[int] = []
    for i, upload in enumerate(uploads):
        if answers[i] is not None:
            continue
        try:
            obj = _staged_row(upload, registered.get(upload.key))
            answers[i] = _same_upload(obj, upload) if obj.version_id else obj
        except DomainError as exc:
            answers[i] = exc
            continue
        if not obj.version_id:
            to_write.append(i)
    written = []
    for i, version in zip(to_write, _upload_all([uploads[i] for i in to_write])):
        if isinstance(version, Exception):  # the store's trouble, or a different result under this key
            answers[i] = version
        else:
            written.append((i, uploads[i], version))
    _record(answers, written)
    return answers


def check_storage_quota(tenant_id: str) -> None:
    """QuotaExceeded when the tenant's results already hold its max_stored_bytes (as cleanup
    last counted them: runs.models.TenantStorage)."""
    limit, stored = Tenant.objects.filter(id=tenant_id).values_list("max_stored_bytes", "storage__stored_bytes").get()
    stored = stored or 0
    if stored >= limit:
        raise QuotaExceeded(
            f"the tenant's results hold {stored} bytes, its quota is {limit}: no new result is stored until "
            f"retention frees room (or the quota is raised)",
            details={"quota": "maxStoredBytes", "limit": limit, "storedBytes": stored},
        )


def _too_large(upload: Upload) -> ResultTooLarge | None:
    try:
        check_result_size(upload.data.size if isinstance(upload.data, FileSource) else len(upload.data))
    except ResultTooLarge as exc:
        return exc
    return None


def _staged_row(upload: Upload, registered: tuple | None) -> StoredObject:
    """The staged registry row of this upload, created if new; NotFound, Forbidden or
    StaleFence when the caller may not upload for this attempt."""
    if registered is not None:  # the common case: register_uploads_if_owned inserted it
        object_id, created_at = registered
        return StoredObject(id=object_id, key=upload.key, run_id=upload.run_id, attempt_id=upload.attempt_id,
                            fence=upload.fence, state=ObjectState.STAGED, content_type=upload.content_type,
                            created_at=created_at)
    with metrics.counting_stale("stage"), transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(id=upload.run_id).first()
        if run is None:
            raise NotFound("no such run")
        now = authority_now()
        current_attempt(run, upload.attempt_id, upload.fence, now, worker_token=upload.worker_token,
                        operation="stage")
        existing = StoredObject.objects.filter(key=upload.key).first()
        if existing is None:
            check_storage_quota(run.tenant_id)
            existing = StoredObject.objects.create(
                key=upload.key, run=run, attempt_id=upload.attempt_id, fence=upload.fence, created_at=now,
                content_type=upload.content_type,
            )
        return existing


def _upload_all(uploads: list[Upload]) -> list[StoredVersion | Exception]:
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


def _settled(store, upload: Upload, result: StoredVersion | Exception) -> StoredVersion:
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


def _record(answers: list, written: list[tuple[int, Upload, StoredVersion]]) -> None:
    """Record the written versions. A row another request of the same attempt recorded with
    this very version first (a worker repeating an upload whose answer it lost, both writes
    adopting one version) answers as that repeat; a row cleanup took during the upload can
    never be published, and its upload is removed."""
    for i, upload, version in written:
        obj = answers[i]
        obj.version_id, obj.checksum, obj.size = version.version_id, version.checksum, version.size
        obj.content_type = version.content_type
        obj.filename = _recorded_filename(upload)
    recorded = record_uploads([answers[i] for i, _, _ in written])
    for i, upload, version in written:
        if answers[i].id in recorded:
            continue
        row = (StoredObject.objects.filter(id=answers[i].id, version_id=version.version_id)
               .exclude(state__in=(ObjectState.DELETING, ObjectState.DELETED)).first())
        if row is None:
            answers[i] = _unpublishable(upload, version)
            continue
        try:
            answers[i] = _same_upload(row, upload)
        except InvalidState as exc:
            answers[i] = exc


def _unpublishable(upload: Upload, version: StoredVersion) -> InvalidState:
    """Cleanup took the row while we uploaded: this version can never be published."""
    try:
        get_object_store().delete(upload.key, version.version_id)
    except Exception:  # at worst one unreferenced object remains for the orphan sweep
        log.warning("could not remove unpublishable upload %s", upload.key, exc_info=True)
    return InvalidState("the staged object was claimed by cleanup; upload under a new attempt")


def _same_upload(existing: StoredObject, upload: Upload) -> StoredObject:
    """The recorded object when `upload` repeats it exactly: the same bytes, type and name."""
    if (existing.checksum != checksum_of(upload.data) or existing.content_type != upload.content_type
            or existing.filename != _recorded_filename(upload)):
        raise InvalidState("this attempt already uploaded a different result (bytes, type or file name); "
                           "objects are immutable")
    return existing


def _recorded_filename(upload: Upload) -> str:
    return download_filename(upload.filename) if upload.filename else ""
