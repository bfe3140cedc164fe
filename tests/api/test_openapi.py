import pytest
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db

CONTRACT_OPERATIONS = {
    ("/api/v1/schedules", "get"),
    ("/api/v1/schedules", "post"),
    ("/api/v1/schedules/preview", "post"),
    ("/api/v1/schedules/{schedule_id}", "get"),
    ("/api/v1/schedules/{schedule_id}", "patch"),
    ("/api/v1/schedules/{schedule_id}", "delete"),
    ("/api/v1/schedules/{schedule_id}/pause", "post"),
    ("/api/v1/schedules/{schedule_id}/resume", "post"),
    ("/api/v1/schedules/{schedule_id}/runs", "get"),
    ("/api/v1/schedules/{schedule_id}/runs", "post"),
    ("/api/v1/runs/{run_id}", "get"),
    ("/api/v1/runs/{run_id}/cancel", "post"),
    ("/api/v1/runs/{run_id}/result", "get"),
    ("/api/v1/worker/claim", "post"),
    ("/api/v1/worker/heartbeat", "post"),
    ("/api/v1/worker/complete", "post"),
    ("/api/v1/worker/runs/{run_id}/attempts/{attempt_id}/result", "put"),
}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema__is_valid_openapi(schema):
    validate(schema)


def test_schema__describes_every_contract_operation(schema):
    described = {(path, method) for path, item in schema["paths"].items() for method in item}
    assert CONTRACT_OPERATIONS <= described


def test_schema__error_bodies_are_described(schema):
    components = schema["components"]["schemas"]
    assert "ErrorBody" in components
    error = components["ErrorBody"]
    assert error["required"] == ["error"]
    for path, method in CONTRACT_OPERATIONS:
        responses = schema["paths"][path][method]["responses"]
        error_statuses = [status for status in responses if status.startswith("4")]
        assert "401" in error_statuses and "403" in error_statuses, (path, method)
        for status in error_statuses:
            ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/ErrorBody", (path, method, status)


def test_schema__bearer_security_on_every_operation(schema):
    schemes = schema["components"]["securitySchemes"]
    assert schemes["TenantToken"] == {"type": "http", "scheme": "bearer", "description": "Tenant API token"}
    assert schemes["WorkerToken"]["scheme"] == "bearer"
    for path, method in CONTRACT_OPERATIONS:
        security = schema["paths"][path][method]["security"]
        expected = "WorkerToken" if path.startswith("/api/v1/worker/") else "TenantToken"
        assert security == [{expected: []}], (path, method, security)


def test_docs__swagger_ui_is_served(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
