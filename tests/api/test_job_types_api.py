import pytest

from schedules.models import JobType, Tenant
from workers.jobs.framework import declared_jobs
from tests.api.conftest import assert_error, create_schedule
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db


def test_job_types__lists_every_allowed_type_with_its_policy(client):
    response = client.get("/api/v1/job-types")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [t["name"] for t in results] == sorted(declared_jobs())
    report = next(t for t in results if t["name"] == "report.sales")
    spec = declared_jobs()["report.sales"]
    assert report == {
        "name": "report.sales",
        "resourceClass": "short",
        "paramsSchema": spec.params_schema,
        "paramsSchemaVersion": 1,
        "leaseSeconds": spec.default_lease_seconds,
        "timeoutSeconds": spec.timeout_seconds,
        "retry": {"maxAttempts": spec.max_attempts, "initialDelaySeconds": 5, "maxDelaySeconds": 300},
        "uncertainEffectPolicy": "hold",
        "statistics": {
            "windowSeconds": 7 * 86400, "samples": 0,
            "durationSeconds": {"p50": None, "p95": None, "p99": None, "mean": None},
            "queueDelaySeconds": {"p50": None, "p95": None, "p99": None, "mean": None},
            "expectedDurationSeconds": 5.0,
        },
    }


def test_job_types__only_the_tenants_own_enabled_types(db):
    limited = make_tenant("initech", job_types=["demo.sleep", "demo.export"])
    JobType.objects.filter(name="demo.export").update(enabled=False)
    response = api_client(limited).get("/api/v1/job-types")
    assert [t["name"] for t in response.json()["results"]] == ["demo.sleep"]


def test_job_types__needs_a_tenant_token(anonymous, worker_client):
    assert_error(anonymous.get("/api/v1/job-types"), 401, "unauthenticated")
    assert_error(worker_client.get("/api/v1/job-types"), 403, "forbidden")
    assert_error(api_client().get("/api/v1/job-types", {"x": "1"}), 401, "unauthenticated")


def test_job_types__unknown_query_parameter_is_invalid(client):
    assert_error(client.get("/api/v1/job-types", {"x": "1"}), 400, "invalid_request", field="x")


def test_create__unknown_job_type_lists_the_valid_ones(db):
    limited = make_tenant("initech", job_types=["demo.sleep", "report.sales"])
    response = api_client(limited).post(
        "/api/v1/schedules",
        {"name": "x", "jobType": "no.such", "recurrence": {"kind": "cron", "cron": "0 9 * * *"}},
    )
    error = assert_error(response, 400, "invalid_request", field="jobType")
    assert error["details"]["validJobTypes"] == ["demo.sleep", "report.sales"]
    assert "demo.sleep, report.sales" in error["message"]


def test_create__a_listed_job_type_is_accepted(client, tenant):
    # celery.task needs the task to run, and the task on the tenant's allowlist.
    Tenant.objects.filter(id=tenant.id).update(celery_tasks=["billing.tasks.export"])
    names = [t["name"] for t in client.get("/api/v1/job-types").json()["results"]]
    for name in names:
        params = {"task": "billing.tasks.export"} if name == "celery.task" else {}
        create_schedule(client, name=f"s-{name}", jobType=name, params=params)
