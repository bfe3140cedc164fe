import pytest

from tests.factories import api_client, make_tenant, make_worker_token

CRON_BODY = {
    "name": "sales-report",
    "jobType": "demo.sleep",
    "params": {"seconds": 0},
    "recurrence": {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"},
}


def pytest_collection_modifyitems(items):
    """schemathesis names each API operation's test `test_api__...[GET /api/v1/audit]`, but
    pytest 9 builds a node id from the test's original name and its parametrization, which
    schemathesis leaves out: all 45 get one id, which pytest-xdist (`PYTEST_WORKERS=2`) takes for a
    single test and runs once. Each gets its operation as its id's parameters."""
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and item.id.params is None:
            item._id = item.id.with_params(label)  # Node.nodeid has no setter


@pytest.fixture(autouse=True)
def file_objects(file_objects):
    """Uploads and downloads through the API land in this test's own directory."""
    return file_objects


@pytest.fixture
def client(tenant):
    return api_client(tenant)


@pytest.fixture
def other_tenant(db):
    return make_tenant("globex")


@pytest.fixture
def other_client(other_tenant):
    return api_client(other_tenant)


@pytest.fixture
def worker(db):
    return make_worker_token("worker-1")


@pytest.fixture
def worker_client(worker):
    return api_client(worker)


@pytest.fixture
def anonymous(db):
    return api_client()


@pytest.fixture
def operator(db):
    """A client with an operator token (the capacity forecast's installation view)."""
    from schedules.tenants import operator_token_create

    _, secret = operator_token_create("ops")
    return api_client(secret)


def post_raw(client, path, data: bytes, content_type="application/json", method="POST"):
    """A request with exactly these body bytes (what a JSON encoder would never send)."""
    return client.generic(method, path, data, content_type=content_type)


def create_schedule(client, **overrides):
    body = {**CRON_BODY, **overrides}
    response = client.post("/api/v1/schedules", body)
    assert response.status_code == 201, response.content
    return response.json()


def run_once(client, schedule_id, body=None, **headers):
    response = client.post(f"/api/v1/schedules/{schedule_id}/runs", body or {}, **headers)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def schedule(client):
    return create_schedule(client)


@pytest.fixture
def queued_run(client, schedule):
    return run_once(client, schedule["scheduleId"])


def claim(worker_client, **body):
    response = worker_client.post("/api/v1/worker/claim", body)
    assert response.status_code == 200, response.content
    return response.json()


def assert_error(response, status: int, code: str, field: str | None = None):
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    if field is not None:
        assert body["error"]["details"].get("field") == field, body
    return body["error"]
