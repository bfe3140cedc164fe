"""The fence in the job's hands: the job's own writes refuse a stale attempt.

An attempt frozen past its lease (a GC pause, a SIGSTOP, a VM migration) can wake up after
its successor has run; the scheduler already refuses its heartbeat, upload and completion,
and these helpers make the job's own writes refuse it too. Each write carries the attempt's
fencing token (``ctx.run_id``, ``ctx.fence``: a later attempt of the same occurrence always
holds a higher fence) and is a compare-and-set that the store itself decides, never a read
followed by a write:

- a table of the team's (PostgreSQL or SQLite): a model with the ``FencedRow`` columns,
  written with ``fenced_update`` / ``fenced_update_or_create``: one ``UPDATE ... SET ...,
  fence = :fence WHERE pk = :pk AND (fence IS NULL OR fence_run_id <> :run OR fence <= :fence)``;
- an object in the team's S3-compatible bucket (``fenced_put`` / ``fenced_get``): the bytes
  under an immutable name of the attempt's (``<key>/fence-<n>-<attempt id>``), and a pointer
  (``<key>/current``) moved by a conditional write (If-Match on the pointer's ETag,
  If-None-Match for the first), which a higher fence's pointer refuses.

A refused write raises ``StaleAttempt`` (a ``JobLost``: the runtime ends the attempt without
completing it, and a job's ``except Exception`` does not swallow it). The fence orders the
attempts of one occurrence; writes of different occurrences are not ordered by it, so a row
or object a job fences belongs to its occurrence's work (a day's totals, a month's export).
For a call to a service that takes no token, ``ctx.still_owner()`` asks the authority.
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError
from django.db import IntegrityError, models, transaction
from django.db.models import Q

from workers.jobs.framework import JobLost

POINTER = "current"
POINTER_TRIES = 5  # a pointer contended by this many concurrent moves is an error, not a loop


class StaleAttempt(JobLost):
    """A later attempt of the same occurrence has written here: this attempt's write was refused."""


class FencedRow(models.Model):
    """The columns of a fenced table (an abstract model to inherit): which occurrence's
    attempt wrote the row last, and its fence. Write such rows only through the helpers."""

    fence_run_id = models.CharField(max_length=40, blank=True, default="")
    fence = models.BigIntegerField(null=True, blank=True)

    class Meta:
        abstract = True


def fenced_update(ctx, model, pk, **values) -> None:
    """Set ``values`` on ``model``'s row ``pk`` in one guarded UPDATE, applied only while the
    row's stored fence is not higher than ``ctx``'s (or was written by another occurrence).
    StaleAttempt when it is; ``model.DoesNotExist`` when there is no such row."""
    manager = model._default_manager
    if manager.filter(_writable_by(ctx), pk=pk).update(**values, **_stamp(ctx)):
        return
    if manager.filter(pk=pk).exists():
        raise _stale(ctx, f"{model.__name__} {pk!r}")
    raise model.DoesNotExist(f"no {model.__name__} {pk!r}")


def fenced_update_or_create(ctx, model, defaults: dict | None = None, **lookup) -> bool:
    """The row ``lookup`` names (a unique key of ``model``) updated with ``defaults`` as
    fenced_update does, or created with them and ``ctx``'s fence; True when created.
    StaleAttempt when a higher fence of the occurrence holds the row."""
    manager = model._default_manager
    values = {**(defaults or {}), **_stamp(ctx)}
    if manager.filter(_writable_by(ctx), **lookup).update(**values):
        return False
    try:
        # A savepoint: a conflicting insert leaves a caller's transaction usable.
        with transaction.atomic(using=manager.db):
            manager.create(**lookup, **values)
        return True
    except IntegrityError:
        # Created meanwhile (by a later attempt, or a repeat of this one): the guard decides.
        if manager.filter(_writable_by(ctx), **lookup).update(**values):
            return False
        if manager.filter(**lookup).exists():
            raise _stale(ctx, f"{model.__name__} {lookup!r}") from None
        raise  # another constraint of the team's refused the row


def _writable_by(ctx) -> Q:
    return Q(fence__isnull=True) | ~Q(fence_run_id=ctx.run_id) | Q(fence__lte=ctx.fence)


def _stamp(ctx) -> dict:
    return {"fence_run_id": ctx.run_id, "fence": ctx.fence}


def _stale(ctx, what: str) -> StaleAttempt:
    return StaleAttempt(f"{what} holds a later attempt's write than fence {ctx.fence} of run {ctx.run_id}: "
                        f"this attempt no longer owns the run")


def fenced_put(ctx, client, bucket: str, key: str, body: bytes, *, content_type: str = "application/octet-stream") -> str:
    """Write ``body`` as ``key``'s current version for ``ctx``'s attempt, with a botocore
    or boto3 S3 ``client``: the bytes under the attempt's own name, then ``key``'s pointer
    moved to them by a conditional write. StaleAttempt (the attempt's object removed) when the
    pointer holds a higher fence of the occurrence. Returns the name the bytes are under."""
    name = f"{key}/fence-{ctx.fence}-{ctx.attempt_id}"
    client.put_object(Bucket=bucket, Key=name, Body=body, ContentType=content_type,
                      Metadata={"run-id": ctx.run_id, "fence": str(ctx.fence)})
    pointer_key = f"{key}/{POINTER}"
    ours = {"object": name, "runId": ctx.run_id, "attemptId": ctx.attempt_id, "fence": ctx.fence}
    for _ in range(POINTER_TRIES):
        pointer, etag = _read_pointer(client, bucket, pointer_key)
        if pointer == ours:
            return name  # a repeat of this very write
        if pointer and pointer.get("runId") == ctx.run_id and int(pointer.get("fence", 0)) > ctx.fence:
            client.delete_object(Bucket=bucket, Key=name)
            raise _stale(ctx, f"s3://{bucket}/{key}")
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            client.put_object(Bucket=bucket, Key=pointer_key, Body=json.dumps(ours).encode(),
                              ContentType="application/json", **condition)
            return name
        except ClientError as exc:
            if not _lost_race(exc):
                raise
    raise RuntimeError(f"the pointer of s3://{bucket}/{key} kept moving under {POINTER_TRIES} tries")


def fenced_get(client, bucket: str, key: str) -> bytes | None:
    """The bytes ``key``'s pointer names (the highest fence's write), None before any write."""
    pointer, _ = _read_pointer(client, bucket, f"{key}/{POINTER}")
    if pointer is None:
        return None
    return client.get_object(Bucket=bucket, Key=pointer["object"])["Body"].read()


def _read_pointer(client, bucket: str, pointer_key: str) -> tuple[dict | None, str | None]:
    try:
        response = client.get_object(Bucket=bucket, Key=pointer_key)
    except ClientError as exc:
        if _error_code(exc) in ("NoSuchKey", "404"):
            return None, None
        raise
    return json.loads(response["Body"].read()), response["ETag"]


def _lost_race(exc: ClientError) -> bool:
    """Another writer moved (or first wrote, or removed) the pointer between our read and write."""
    return _error_code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
