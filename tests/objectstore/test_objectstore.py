"""One contract, two backends: every test here runs against the filesystem store and a real moto_server."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from django.core import signing
from django.test import Client

from objectstore import ObjectExists, ObjectMissing, get_object_store, object_store_from_url
from objectstore.filesystem import FilesystemObjectStore, make_download_token, read_download_token

KEY = "runs/run_7/att_2/result"
BASE_URL = "http://testserver"


@pytest.fixture(params=["file_store", "s3_store"])
def store(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def served_file_store(file_store, settings, db):
    """The file store that the download view serves, reachable through workers.urls. A
    request through Django ends by checking the database connection (request_finished),
    so these tests may touch it whatever ran before them."""
    settings.OBJECT_STORE_URL = f"file://{file_store.root}"
    settings.ROOT_URLCONF = "workers.urls"
    return file_store


def fetch(store, url: str, request) -> tuple[int, bytes, dict]:
    """GET a download URL without credentials: over HTTP for S3, through Django for the file store."""
    if isinstance(store, FilesystemObjectStore):
        assert request.getfixturevalue("served_file_store") is store
        response = Client().get(urlsplit(url).path)
        body = b"".join(response.streaming_content)
        response.close()
        return response.status_code, body, {k.lower(): v for k, v in response.headers.items()}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        return response.status, response.read(), {k.lower(): v for k, v in response.headers.items()}


def test_put_new__head_and_get_roundtrip_with_checksum(store):
    data = b'{"rows": 3}'

    stored = store.put_new(KEY, data, "application/json")

    assert stored.key == KEY
    assert stored.checksum == "sha256:" + hashlib.sha256(data).hexdigest()
    assert stored.size == len(data)
    assert stored.content_type == "application/json"
    assert store.head(KEY, stored.version_id) == stored
    assert store.get(KEY, stored.version_id) == data


def test_put_new__empty_object_roundtrips(store):
    stored = store.put_new("empty", b"", "application/octet-stream")

    assert store.get("empty", stored.version_id) == b""
    assert store.head("empty", stored.version_id).size == 0


def test_put_new__existing_key_raises_and_keeps_first_bytes(store):
    first = store.put_new(KEY, b"first", "text/plain")

    with pytest.raises(ObjectExists):
        store.put_new(KEY, b"second", "text/plain")
    with pytest.raises(ObjectExists):
        store.put_new(KEY, b"first", "text/plain")

    assert store.get(KEY, first.version_id) == b"first"
    assert store.head(KEY, first.version_id) == first


def test_get__wrong_version_raises_missing(store):
    stored = store.put_new(KEY, b"bytes", "text/plain")
    other = store.put_new("runs/run_7/att_1/result", b"other bytes", "text/plain")

    for version_id in (other.version_id, "0" * 64, "not-a-version"):
        with pytest.raises(ObjectMissing):
            store.get(KEY, version_id)
        with pytest.raises(ObjectMissing):
            store.head(KEY, version_id)
    with pytest.raises(ObjectMissing):
        store.get("runs/never/written", stored.version_id)


def test_delete__removes_exactly_that_version_and_is_idempotent(store):
    old = store.put_new(KEY, b"old", "text/plain")
    store.delete(KEY, old.version_id)
    with pytest.raises(ObjectMissing):
        store.get(KEY, old.version_id)

    new = store.put_new(KEY, b"new", "text/plain")
    store.delete(KEY, old.version_id)  # deleting the gone version again must not touch the new one
    store.delete(KEY, "not-a-version")

    assert store.get(KEY, new.version_id) == b"new"


def test_delete_many__one_answer_per_item__a_gone_version_counts_as_deleted(store):
    first = store.put_new(KEY, b"first", "text/plain")
    other = store.put_new("runs/run_7/att_1/result", b"other", "text/plain")
    kept = store.put_new("runs/run_8/att_1/result", b"kept", "text/plain")
    store.delete(other.key, other.version_id)

    answers = store.delete_many([(KEY, first.version_id), (other.key, other.version_id), ("a//b", "v"),
                                 (KEY, "not-a-version")])

    assert [answer is None for answer in answers] == [True, True, False, True]
    assert isinstance(answers[2], ValueError)  # an unsafe key is that item's error alone
    for stored in (first, other):
        with pytest.raises(ObjectMissing):
            store.head(stored.key, stored.version_id)
    assert store.get(kept.key, kept.version_id) == b"kept"
    assert store.delete_many([]) == []


def test_s3_delete_many__batches_of_a_thousand__a_per_key_error_is_its_items(s3_store, monkeypatch):
    stored = [s3_store.put_new(f"runs/run_{i}/result", b"x", "text/plain") for i in range(1003)]
    requests = []
    send = s3_store.client.delete_objects

    def delete_objects(**kw):
        requests.append(len(kw["Delete"]["Objects"]))
        answer = send(**kw)
        if len(requests) == 2:  # the store refuses one key of the second request
            answer["Errors"] = [{"Key": s3_store._s3_key(stored[1001].key), "VersionId": stored[1001].version_id,
                                 "Code": "AccessDenied", "Message": "refused"}]
        return answer

    monkeypatch.setattr(s3_store.client, "delete_objects", delete_objects)
    answers = s3_store.delete_many([(s.key, s.version_id) for s in stored])

    assert requests == [1000, 3]
    assert [i for i, answer in enumerate(answers) if answer is not None] == [1001]
    assert "AccessDenied" in str(answers[1001])
    with pytest.raises(ObjectMissing):
        s3_store.head(stored[1002].key, stored[1002].version_id)


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/etc/passwd", "a\x00b", "", "a//b", "a/./b", "a/"])
def test_keys__unsafe_keys_are_rejected(store, key):
    with pytest.raises(ValueError):
        store.put_new(key, b"x", "text/plain")


def test_keys__prefix_of_another_key_is_its_own_object(store):
    parent = store.put_new("runs/run_7", b"parent", "text/plain")
    child = store.put_new("runs/run_7/result", b"child", "text/plain")

    assert store.get("runs/run_7", parent.version_id) == b"parent"
    assert store.get("runs/run_7/result", child.version_id) == b"child"


def test_ensure_ready__is_idempotent(store):
    store.ensure_ready()
    store.ensure_ready()


def test_download_url__serves_exact_version_without_auth(store, request):
    data = bytes(range(256)) * 10
    stored = store.put_new(KEY, data, "application/x-report")

    url = store.download_url(KEY, stored.version_id, expires_in=60, base_url=BASE_URL)
    status, body, headers = fetch(store, url, request)

    assert urlsplit(url).scheme == "http"
    assert status == 200
    assert body == data
    assert headers["content-disposition"] == 'attachment; filename="result"'
    if isinstance(store, FilesystemObjectStore):
        assert headers["content-type"] == "application/x-report"
    else:  # S3 cannot send nosniff: the link overrides the type with an opaque one
        assert headers["content-type"] == "application/octet-stream"


@pytest.mark.parametrize("content_type", ["text/html", "image/svg+xml", "application/javascript"])
def test_download_view__serves_any_type_as_a_sandboxed_attachment(served_file_store, content_type):
    stored = served_file_store.put_new(KEY, b"<script>alert(document.cookie)</script>", content_type)
    response = Client().get(urlsplit(served_file_store.download_url(KEY, stored.version_id, 60, BASE_URL)).path)
    response.close()
    assert response["Content-Disposition"] == 'attachment; filename="result"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "sandbox"


def test_download_view__sends_checksum_headers(served_file_store):
    stored = served_file_store.put_new(KEY, b"report", "text/csv")
    url = served_file_store.download_url(KEY, stored.version_id, 60, BASE_URL + "/")

    response = Client().get(urlsplit(url).path)
    body = b"".join(response.streaming_content)
    response.close()

    assert url.startswith(BASE_URL + "/api/v1/objects/")
    assert body == b"report"
    assert response["ETag"] == f'"{stored.version_id}"'
    assert "sha256:" + response["X-Checksum-Sha256"] == stored.checksum
    assert response["Content-Length"] == "6"


def _assert_error(response, status: int, code: str):
    assert response.status_code == status
    assert response.json() == {"error": {"code": code, "message": response.json()["error"]["message"], "details": {}}}


def test_download_view__refuses_expired_token(served_file_store):
    stored = served_file_store.put_new(KEY, b"report", "text/csv")
    token = make_download_token(KEY, stored.version_id, expires_at=time.time() - 1)

    _assert_error(Client().get(f"/api/v1/objects/{token}"), 403, "forbidden")


def test_download_view__refuses_tampered_token(served_file_store):
    stored = served_file_store.put_new(KEY, b"report", "text/csv")
    other = served_file_store.put_new("runs/run_7/att_1/result", b"other", "text/csv")
    token = urlsplit(served_file_store.download_url(KEY, stored.version_id, 60, BASE_URL)).path.rsplit("/", 1)[1]
    forged = make_download_token("runs/run_7/att_1/result", other.version_id, time.time() + 60)
    # Someone else's signature on our payload, and a flipped character in the signature.
    spliced = token.rsplit(":", 1)[0] + ":" + forged.rsplit(":", 1)[1]
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")

    for bad in (spliced, flipped, "garbage"):
        _assert_error(Client().get(f"/api/v1/objects/{bad}"), 403, "forbidden")


def test_download_view__missing_object_is_not_found(served_file_store):
    stored = served_file_store.put_new(KEY, b"report", "text/csv")
    url = served_file_store.download_url(KEY, stored.version_id, 60, BASE_URL)
    served_file_store.delete(KEY, stored.version_id)

    _assert_error(Client().get(urlsplit(url).path), 404, "not_found")


def test_download_token__expires_at_its_deadline():
    token = make_download_token(KEY, "v1", expires_at=1000)

    assert read_download_token(token, now=1000) == (KEY, "v1")
    with pytest.raises(signing.SignatureExpired):
        read_download_token(token, now=1001)


def test_s3_download_url__is_pinned_to_its_version(s3_store):
    old = s3_store.put_new(KEY, b"old", "text/plain")
    url = s3_store.download_url(KEY, old.version_id, 60, BASE_URL)
    s3_store.delete(KEY, old.version_id)
    s3_store.put_new(KEY, b"new", "text/plain")

    # The link names the deleted version, so it must not fall through to the newer bytes.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(url, timeout=5)
    assert refused.value.code in (403, 404)


def test_s3_download_url__is_signed_for_the_public_endpoint(s3_store, moto_server, settings):
    # The same moto server under a second name stands in for MinIO's host-facing address.
    public = moto_server.replace("127.0.0.1", "localhost")
    settings.OBJECT_STORE_URL = f"s3://{s3_store.bucket}/{s3_store.prefix.strip('/')}"
    settings.S3_ENDPOINT_URL = moto_server
    settings.S3_PUBLIC_ENDPOINT_URL = public
    stored = get_object_store().put_new(KEY, b"report", "text/csv")

    url = get_object_store().download_url(KEY, stored.version_id, 60, BASE_URL)

    assert url.startswith(public + "/")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        assert response.read() == b"report"


def test_file_put_new__concurrent_writers_exactly_one_wins(file_store):
    results, barrier = [], threading.Barrier(8)

    def write(i):
        barrier.wait()
        try:
            results.append(file_store.put_new(KEY, f"writer {i}".encode(), "text/plain"))
        except ObjectExists:
            results.append(None)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert file_store.get(KEY, winners[0].version_id).startswith(b"writer ")
    # Temp files never linger, and never sit under the final name.
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    assert sorted(p.name for p in (file_store.root / digest[:2]).iterdir()) == [digest + ".object"]


def test_file_layout__one_file_per_object_named_by_its_keys_hash(file_store):
    keys = [KEY, "runs/run_7", "reports/2026/12/summary.csv", "a.object/b"]
    for key in keys:
        file_store.put_new(key, key.encode(), "text/plain")

    # No directory per key segment: the 256 directories made once, each object a file in one.
    assert sorted(p.name for p in file_store.root.iterdir()) == [f"{i:02x}" for i in range(256)]
    for key in keys:
        digest = hashlib.sha256(key.encode()).hexdigest()
        header, data = (file_store.root / digest[:2] / f"{digest}.object").read_bytes().split(b"\n", 1)
        assert json.loads(header)["key"] == key  # the file says which object it holds
        assert data == key.encode()


def test_file_layout__objects_of_the_earlier_layout_are_read_kept_and_deleted(file_store):
    # The earlier layout kept an object at its key's own path, with no key in its header.
    data = b"written by an earlier version"
    digest = hashlib.sha256(data).hexdigest()
    legacy = file_store.root / "runs/run_7/att_2/result.object"
    legacy.parent.mkdir(parents=True)
    header = json.dumps({"content_type": "text/csv", "sha256": digest, "size": len(data)}).encode()
    legacy.write_bytes(header + b"\n" + data)

    assert file_store.get(KEY, digest) == data
    assert file_store.current(KEY) == file_store.head(KEY, digest)
    assert file_store.head(KEY, digest).content_type == "text/csv"
    with pytest.raises(ObjectExists):
        file_store.put_new(KEY, b"a second object under the same key", "text/plain")
    assert file_store.get(KEY, digest) == data

    file_store.delete(KEY, digest)
    assert not legacy.exists()
    with pytest.raises(ObjectMissing):
        file_store.current(KEY)


def test_get_object_store__built_once_from_settings(settings, tmp_path):
    settings.OBJECT_STORE_URL = f"file://{tmp_path}"

    assert get_object_store() is get_object_store()
    assert get_object_store().root == tmp_path


def test_object_store_from_url__rejects_unknown_schemes():
    for url in ("ftp://host/x", "file://relative/path", "s3://"):
        with pytest.raises(ValueError):
            object_store_from_url(url)


def test_download_url__carries_the_jobs_file_name(store, request):
    stored = store.put_new(KEY, b"a,b\n", "text/csv")
    url = store.download_url(KEY, stored.version_id, 60, BASE_URL, filename="invoices-ACME-2026-12-02.csv")
    status, body, headers = fetch(store, url, request)
    assert status == 200 and body == b"a,b\n"
    assert headers["content-disposition"] == 'attachment; filename="invoices-ACME-2026-12-02.csv"'


@pytest.mark.parametrize(
    ("given", "served"),
    [
        ("../../etc/passwd", "result"),
        ('a"b.csv', "result"),
        ("line\nbreak.csv", "result"),
        ("", "result"),
        ("x" * 201, "result"),
        ("résumé 2026.pdf", "résumé 2026.pdf"),
    ],
)
def test_download_url__only_a_plain_file_name_is_served(given, served):
    from objectstore import download_filename

    assert download_filename(given) == served
