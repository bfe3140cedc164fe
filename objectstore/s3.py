"""S3 backend: a versioned bucket, conditional creates, and reads pinned to a VersionId."""

from __future__ import annotations

import base64
import hashlib

from botocore.exceptions import ClientError
from django.utils.http import content_disposition_header

from objectstore import DEFAULT_FILENAME, ObjectExists, ObjectMissing, StoredVersion, check_key, download_filename
from objectstore.s3_client import s3_client
from objectstore.sources import CHUNK_BYTES, ChecksumMismatch, FileSource, VerifyingReader, checksum_of

# 412: the key already has a current version; 409: a concurrent conditional write to it is in flight.
_EXISTS_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}
# 400 InvalidArgument is S3's answer to a malformed VersionId; 405 means the version is a delete marker.
_MISSING_CODES = {"404", "NoSuchKey", "NoSuchVersion", "405", "MethodNotAllowed", "InvalidArgument"}
DELETE_BATCH = 1000  # S3's most keys per DeleteObjects request


class S3ObjectStore:
    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        public_endpoint_url: str | None = None,
    ):
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.region = region
        self.client = s3_client(endpoint_url, region)
        # A presigned URL names the host it was signed for: signing with the address clients
        # reach (not the one inside a container network) keeps the link usable outside it.
        self.presign_client = s3_client(public_endpoint_url, region) if public_endpoint_url else self.client

    def ensure_ready(self) -> None:
        create = {"Bucket": self.bucket}
        if self.region != "us-east-1":
            create["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self.client.create_bucket(**create)
        except ClientError as exc:
            if _code(exc) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise
        # Without versioning there is no VersionId to pin, so a result reference could drift.
        self.client.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"})

    def put_new(self, key: str, data: bytes, content_type: str) -> StoredVersion:
        digest = hashlib.sha256(data)
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=self._s3_key(key),
                Body=data,
                ContentType=content_type,
                IfNoneMatch="*",
                # The metadata copy is what we read back; ChecksumSHA256 only makes servers that
                # support it verify the upload, and is ignored elsewhere.
                Metadata={"sha256": digest.hexdigest()},
                ChecksumSHA256=base64.b64encode(digest.digest()).decode(),
            )
        except ClientError as exc:
            if _code(exc) in _EXISTS_CODES:
                raise ObjectExists(key) from None
            raise
        return StoredVersion(key, self._version_of(response), "sha256:" + digest.hexdigest(), len(data), content_type)

    def put_new_file(self, key: str, source: FileSource, content_type: str) -> StoredVersion:
        """Upload a local file as a multipart upload, one part in memory at a time; the
        SHA-256 is computed again on the way, and a mismatch aborts before completion."""
        if source.size <= CHUNK_BYTES:
            with open(source.path, "rb") as f:
                data = f.read(CHUNK_BYTES + 1)
            if checksum_of(data) != source.checksum:
                raise ChecksumMismatch(f"{source.path} changed before it was uploaded")
            return self.put_new(key, data, content_type)
        s3_key = self._s3_key(key)
        if self._exists(s3_key):  # a repeated stage: spare the upload that completion would refuse
            raise ObjectExists(key)
        upload_id = self.client.create_multipart_upload(
            Bucket=self.bucket, Key=s3_key, ContentType=content_type, ChecksumAlgorithm="SHA256",
            Metadata={"sha256": source.checksum.removeprefix("sha256:")},
        )["UploadId"]
        try:
            parts = self._upload_parts(s3_key, upload_id, source)
            response = self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=s3_key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*",
            )
        except BaseException as exc:
            self._abort(s3_key, upload_id)
            if isinstance(exc, ClientError) and _code(exc) in _EXISTS_CODES:
                raise ObjectExists(key) from None
            raise
        return StoredVersion(key, self._version_of(response), source.checksum, source.size, content_type)

    def _upload_parts(self, s3_key: str, upload_id: str, source: FileSource) -> list[dict]:
        parts = []
        with open(source.path, "rb") as f:
            reader = VerifyingReader(source, f)
            for number, (part, digest) in enumerate(reader.parts(), start=1):
                # The part's own SHA-256, read before it is sent: S3 refuses a part whose bytes
                # differ from it (changed on disk since, or damaged in transit).
                part_sum = base64.b64encode(digest).decode()
                answer = self.client.upload_part(
                    Bucket=self.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number, Body=part,
                    ChecksumSHA256=part_sum,
                )
                parts.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": part_sum})
            reader.verify()
        return parts

    def _exists(self, s3_key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=s3_key)
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                return False
            raise
        return True

    def _abort(self, s3_key: str, upload_id: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id)
        except ClientError:  # parts left behind expire under the bucket's lifecycle rule, if any
            pass

    def _version_of(self, response: dict) -> str:
        version_id = response.get("VersionId")
        if not version_id or version_id == "null":
            raise RuntimeError(f"bucket {self.bucket!r} has no versioning; call ensure_ready()")
        return version_id

    def head(self, key: str, version_id: str) -> StoredVersion:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self._s3_key(key), VersionId=version_id)
        except ClientError as exc:
            raise _missing_or_raise(exc, key, version_id) from None
        return _stored_version(key, version_id, response)

    def current(self, key: str) -> StoredVersion:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self._s3_key(key))
        except ClientError as exc:
            raise _missing_or_raise(exc, key, "current") from None
        return _stored_version(key, response["VersionId"], response)

    def get(self, key: str, version_id: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._s3_key(key), VersionId=version_id)
        except ClientError as exc:
            raise _missing_or_raise(exc, key, version_id) from None
        with response["Body"] as body:
            return body.read()

    def delete(self, key: str, version_id: str) -> None:
        [error] = self.delete_many([(key, version_id)])
        if error is not None:
            raise error

    def delete_many(self, items: list[tuple[str, str]]) -> list[Exception | None]:
        """DeleteObjects, DELETE_BATCH versions a request. Deleting by VersionId removes that
        version for good (no delete marker), and S3 answers success for versions that are
        already gone; a per-key error of a missing version counts as deleted too. A request
        that fails whole (an outage) is that error for each of its items."""
        answers: list[Exception | None] = []
        for start in range(0, len(items), DELETE_BATCH):
            answers += self._delete_batch(items[start:start + DELETE_BATCH])
        return answers

    def _delete_batch(self, items: list[tuple[str, str]]) -> list[Exception | None]:
        answers: list[Exception | None] = [None] * len(items)
        sent: dict[str, dict[str, list[int]]] = {}  # S3 key -> version -> the items asking for it
        for i, (key, version_id) in enumerate(items):
            try:
                sent.setdefault(self._s3_key(key), {}).setdefault(version_id, []).append(i)
            except ValueError as exc:  # an unsafe key: never sent
                answers[i] = exc
        if not sent:
            return answers
        objects = [{"Key": s3_key, "VersionId": version} for s3_key, versions in sent.items() for version in versions]
        try:
            response = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
        except Exception as exc:  # noqa: BLE001 - the whole request failed: each of its items did
            for versions in sent.values():
                for indexes in versions.values():
                    for i in indexes:
                        answers[i] = exc
            return answers
        for error in response.get("Errors", []):
            if error.get("Code") in _MISSING_CODES:
                continue
            failure = ClientError({"Error": error}, "DeleteObjects")
            versions = sent.get(error.get("Key"), {})
            # An error that names no version is its key's, whichever versions were asked for.
            for version in [error["VersionId"]] if error.get("VersionId") else list(versions):
                for i in versions.get(version, []):
                    answers[i] = failure
        return answers

    def download_url(
        self, key: str, version_id: str, expires_in: int, base_url: str, filename: str = DEFAULT_FILENAME
    ) -> str:
        # S3 cannot send nosniff or a CSP: the link itself makes the answer a download of an
        # opaque type, whatever type the worker stored (the run's result names it).
        params = {
            "Bucket": self.bucket,
            "Key": self._s3_key(key),
            "VersionId": version_id,
            "ResponseContentDisposition": content_disposition_header(True, download_filename(filename)),
            "ResponseContentType": "application/octet-stream",
        }
        return self.presign_client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in)

    def _s3_key(self, key: str) -> str:
        return self.prefix + check_key(key)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _missing_or_raise(exc: ClientError, key: str, version_id: str) -> Exception:
    if _code(exc) in _MISSING_CODES:
        return ObjectMissing(f"{key}@{version_id}")
    return exc


def _stored_version(key: str, version_id: str, response: dict) -> StoredVersion:
    digest = response.get("Metadata", {}).get("sha256")
    if not digest:
        # Not written by put_new, so we cannot vouch for its checksum.
        raise ObjectMissing(f"{key}@{version_id} has no recorded sha256")
    content_type = response.get("ContentType", "binary/octet-stream")
    return StoredVersion(key, version_id, "sha256:" + digest, response["ContentLength"], content_type)
