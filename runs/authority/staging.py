"""Staging: an attempt's output registered before its upload under its attempt-scoped key,
and its version recorded after it, before the fenced completion (runs/authority/completion.py)
may publish it. The upload itself, and any other call to the object store, is the worker's
(workers/uploads.py): the authority does no network I/O.

A worker process stages the outputs of the attempts it finished together: one statement
registers them all (``stage_register``), each is uploaded outside any transaction, one
statement records the versions (``stage_record``). Each upload is still judged on its own:
one that is refused fails alone.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from objectstore import StoredVersion, download_filename
from objectstore.sources import FileSource, checksum_of
from runs import metrics
from runs.authority.ownership import current_attempt
from runs.authority.statements.objects import objects_record_if_staged, objects_register_if_owned
from runs.models import ObjectState, Run, StoredObject
from schedules.models import Tenant
from kernel.clock import authority_now
from kernel.errors import DomainError, InvalidState, NotFound, QuotaExceeded, ResultTooLarge

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


def stage_register(uploads: list[Upload]) -> tuple[list[StoredObject | Exception], list[int]]:
    """Register every upload (staged) before it begins. Per upload, in order: its staged
    registry row, the object an earlier try of the same bytes already recorded, or the
    exception that refused it (ResultTooLarge, NotFound, Forbidden, StaleFence,
    QuotaExceeded, InvalidState); and the indexes of the uploads still to write. A database
    error raises."""
    answers: list[StoredObject | Exception | None] = [_too_large(upload) for upload in uploads]
    registered = objects_register_if_owned([upload for upload, refused in zip(uploads, answers) if refused is None])
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
    return answers, to_write


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
    if registered is not None:  # the common case: objects_register_if_owned inserted it
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


def stage_record(answers: list, written: list[tuple[int, Upload, StoredVersion]]) -> list[tuple[str, str]]:
    """Record the written versions in ``answers`` (stage_register's, each ``written`` upload's
    answer replaced by what it now is). A row another request of the same attempt recorded
    with this very version first (a worker repeating an upload whose answer it lost, both
    writes adopting one version) answers as that repeat; a row cleanup took during the upload
    can never be published: answered InvalidState, and its (key, version) returned for the
    caller to remove from the store."""
    unpublishable = []
    for i, upload, version in written:
        obj = answers[i]
        obj.version_id, obj.checksum, obj.size = version.version_id, version.checksum, version.size
        obj.content_type = version.content_type
        obj.filename = _recorded_filename(upload)
    recorded = objects_record_if_staged([answers[i] for i, _, _ in written])
    for i, upload, version in written:
        if answers[i].id in recorded:
            continue
        row = (StoredObject.objects.filter(id=answers[i].id, version_id=version.version_id)
               .exclude(state__in=(ObjectState.DELETING, ObjectState.DELETED)).first())
        if row is None:  # cleanup took the row while we uploaded
            answers[i] = InvalidState("the staged object was claimed by cleanup; upload under a new attempt")
            unpublishable.append((upload.key, version.version_id))
            continue
        try:
            answers[i] = _same_upload(row, upload)
        except InvalidState as exc:
            answers[i] = exc
    return unpublishable


def _same_upload(existing: StoredObject, upload: Upload) -> StoredObject:
    """The recorded object when `upload` repeats it exactly: the same bytes, type and name."""
    if (existing.checksum != checksum_of(upload.data) or existing.content_type != upload.content_type
            or existing.filename != _recorded_filename(upload)):
        raise InvalidState("this attempt already uploaded a different result (bytes, type or file name); "
                           "objects are immutable")
    return existing


def _recorded_filename(upload: Upload) -> str:
    return download_filename(upload.filename) if upload.filename else ""
