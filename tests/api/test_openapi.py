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
        assert "429" in error_statuses, (path, method)  # every token is rate-limited
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


def _operations(schema):
    return [(path, method, op) for path, item in schema["paths"].items() for method, op in item.items()]


def test_schema__every_operation_has_a_summary_and_its_own_description(schema):
    descriptions = {}
    for path, method, operation in _operations(schema):
        assert operation.get("summary"), (path, method)
        description = operation.get("description", "")
        assert len(description) > 60 and "request.tenant" not in description, (path, method, description)
        descriptions.setdefault(description, []).append((path, method))
    shared = {text: ops for text, ops in descriptions.items() if len(ops) > 1}
    assert not shared, shared


# Held back until two validation gaps are closed (see scheduler_project/http/api_docs.py).
REQUEST_EXAMPLES_HELD_BACK = {("/api/v1/schedules/{schedule_id}", "patch"), ("/api/v1/schedules/preview", "post")}


def test_schema__contract_operations_with_a_body_show_examples(schema):
    for path, method in CONTRACT_OPERATIONS:
        if (path, method) in REQUEST_EXAMPLES_HELD_BACK:
            continue
        operation = schema["paths"][path][method]
        media = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if media is not None:
            assert media.get("examples"), (path, method)
        success = next(status for status in operation["responses"] if status.startswith("2"))
        if status_body := operation["responses"][success].get("content", {}).get("application/json"):
            assert status_body.get("examples"), (path, method, success)


def test_schema__params_of_every_request_body_list_each_job_type(schema):
    from workers.jobs.framework import declared_jobs

    components = schema["components"]["schemas"]
    for name in ("ScheduleCreateRequest", "ScheduleUpdateRequest", "RunOnceRequest"):
        description = components[name]["properties"]["params"]["description"]
        for job_type, spec in declared_jobs().items():
            assert f"`{job_type}`" in description, (name, job_type)
            for parameter in spec.params_schema["properties"]:
                assert f"`{parameter}`" in description, (name, job_type, parameter)
