"""Results uploaded from a local file in chunks (S3 multipart): both backends, the same contract
as put_new, plus a checksum computed again on the way. S3 runs against a real moto_server."""

from __future__ import annotations

import hashlib
import os

import pytest

from objectstore import ObjectExists, ObjectMissing
from objectstore.s3 import S3ObjectStore
from objectstore.sources import CHUNK_BYTES, ChecksumMismatch, FileSource, checksum_of, put_new_from

KEY = "runs/run_9/att_1/result"


@pytest.fixture(params=["file_store", "s3_store"])
def store(request):
    return request.getfixturevalue(request.param)


def write_file(path, size: int) -> bytes:
    """``size`` bytes in 128 KiB blocks that all differ, so a part stored out of place shows."""
    blocks = (hashlib.sha256(i.to_bytes(8, "big")).digest() * 4096 for i in range(size // (128 * 1024) + 1))
    data = b"".join(blocks)[:size]
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("size", [0, 1000, 2 * CHUNK_BYTES + 12345])
def test_put_new_file__stores_the_file_with_its_checksum(store, tmp_path, size):
    data = write_file(tmp_path / "out.csv", size)
    source = FileSource.of(tmp_path / "out.csv")
    assert source.checksum == "sha256:" + hashlib.sha256(data).hexdigest() == checksum_of(data)

    stored = put_new_from(store, KEY, source, "text/csv")

    assert (stored.checksum, stored.size, stored.content_type) == (source.checksum, size, "text/csv")
    assert store.head(KEY, stored.version_id) == stored
    assert store.get(KEY, stored.version_id) == data


def test_put_new_file__s3_uploads_a_large_file_in_parts(s3_store, tmp_path):
    write_file(tmp_path / "big", 2 * CHUNK_BYTES + 1)

    stored = s3_store.put_new_file(KEY, FileSource.of(tmp_path / "big"), "text/csv")

    head = s3_store.client.head_object(Bucket=s3_store.bucket, Key=s3_store._s3_key(KEY),
                                       VersionId=stored.version_id, PartNumber=1)
    assert head["PartsCount"] == 3
    assert head["ContentLength"] == CHUNK_BYTES


@pytest.mark.parametrize("size", [1000, 2 * CHUNK_BYTES + 1])
def test_put_new_file__a_file_changed_after_its_checksum_is_refused_and_nothing_stored(store, tmp_path, size):
    path = tmp_path / "out"
    write_file(path, size)
    source = FileSource.of(path)
    with open(path, "r+b") as f:  # the job's file changes under the upload
        f.seek(size - 1)
        f.write(b"\x00" if f.read(1) != b"\x00" else b"\x01")

    with pytest.raises(ChecksumMismatch):
        store.put_new_file(KEY, source, "text/csv")

    with pytest.raises(ObjectMissing):
        store.current(KEY)
    if isinstance(store, S3ObjectStore):
        assert not store.client.list_multipart_uploads(Bucket=store.bucket).get("Uploads")


@pytest.mark.parametrize("size", [1000, CHUNK_BYTES + 1])
def test_put_new_file__never_overwrites(store, tmp_path, size):
    first = store.put_new(KEY, b"first", "text/plain")
    write_file(tmp_path / "out", size)

    with pytest.raises(ObjectExists):
        store.put_new_file(KEY, FileSource.of(tmp_path / "out"), "text/csv")

    assert store.get(KEY, first.version_id) == b"first"
    assert store.current(KEY) == first
    if isinstance(store, S3ObjectStore):
        assert not store.client.list_multipart_uploads(Bucket=store.bucket).get("Uploads")


def test_file_source__reads_a_missing_file_as_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        FileSource.of(os.fspath(tmp_path / "missing"))
