import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from schedules.models import ApiToken, Tenant
from tests.api.conftest import CRON_BODY, assert_error
from tests.factories import api_client

pytestmark = pytest.mark.django_db

TENANT_ENDPOINT = "/api/v1/schedules"
WORKER_ENDPOINT = "/api/v1/worker/claim"


def test_missing_token__is_401_with_bearer_challenge(anonymous):
    response = anonymous.get(TENANT_ENDPOINT)
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Token abc", "bearer-abc", "Bearer a b", "Bearer " + "x" * 600],
)
def test_malformed_authorization__is_401(anonymous, header):
    anonymous.credentials(HTTP_AUTHORIZATION=header)
    assert_error(anonymous.get(TENANT_ENDPOINT), 401, "unauthenticated")


def test_unknown_token__is_401(tenant):
    assert_error(api_client("not-a-real-token").get(TENANT_ENDPOINT), 401, "unauthenticated")


def test_revoked_token__is_401(tenant):
    ApiToken.objects.filter(tenant=tenant).update(revoked_at=timezone.now())
    assert_error(api_client(tenant).get(TENANT_ENDPOINT), 401, "unauthenticated")


def test_scheme_is_case_insensitive(tenant):
    client = api_client()
    client.credentials(HTTP_AUTHORIZATION=f"bearer {tenant.secret}")
    assert client.get(TENANT_ENDPOINT).status_code == 200


def test_tenant_token__works_on_tenant_endpoints(client):
    response = client.get(TENANT_ENDPOINT)
    assert response.status_code == 200
    assert response.json() == {"results": [], "nextCursor": None}


def test_tenant_token_on_worker_endpoint__is_403_forbidden(client):
    assert_error(client.post(WORKER_ENDPOINT, {}), 403, "forbidden")


def test_worker_token_on_tenant_endpoint__is_403_forbidden(worker_client):
    assert_error(worker_client.get(TENANT_ENDPOINT), 403, "forbidden")
    assert_error(worker_client.post(TENANT_ENDPOINT, CRON_BODY), 403, "forbidden")


def test_worker_token__works_on_worker_endpoints(worker_client):
    assert worker_client.post(WORKER_ENDPOINT, {}).status_code == 204


def test_unauthenticated_precedes_invalid_body(anonymous):
    response = anonymous.post(TENANT_ENDPOINT, data=b"{not json", content_type="application/json")
    assert_error(response, 401, "unauthenticated")


def test_wrong_kind_precedes_invalid_body(worker_client, client):
    response = worker_client.post(TENANT_ENDPOINT, data=b"{not json", content_type="application/json")
    assert_error(response, 403, "forbidden")
    response = client.post("/api/v1/worker/heartbeat", data=b"[]", content_type="application/json")
    assert_error(response, 403, "forbidden")


def test_unauthenticated_precedes_method_not_allowed(anonymous):
    assert_error(anonymous.delete(TENANT_ENDPOINT), 401, "unauthenticated")


def _last_json_line(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def test_create_tenant_command__prints_working_token_and_applies_defaults(db):
    out = StringIO()
    call_command("create_tenant", "initech", stdout=out)
    printed = _last_json_line(out.getvalue())
    assert set(printed) == {"tenantId", "token"}
    tenant = Tenant.objects.get(pk=printed["tenantId"])
    assert (tenant.max_schedules, tenant.max_active_runs, tenant.weight) == (1000, 100, 1)
    assert (tenant.max_emails_per_day, tenant.max_pending_manual_runs) == (1000, 1000)
    # The built-in job types; the examples' (a 100-million-row export) only when named.
    assert set(tenant.allowed_job_types.values_list("name", flat=True)) == {
        "celery.task", "demo.export", "demo.sleep", "report.sales"}
    assert api_client(printed["token"]).get(TENANT_ENDPOINT).status_code == 200
    # Only the hash is stored.
    assert not ApiToken.objects.filter(token_hash=printed["token"]).exists()


def test_create_tenant_command__options(db):
    out = StringIO()
    call_command(
        "create_tenant",
        "umbrella",
        "--job-types",
        "demo.sleep",
        "--max-schedules",
        "7",
        "--max-active-runs",
        "3",
        "--weight",
        "5",
        "--max-emails-per-day",
        "11",
        "--max-pending-manual-runs",
        "13",
        stdout=out,
    )
    tenant = Tenant.objects.get(pk=_last_json_line(out.getvalue())["tenantId"])
    assert (tenant.max_schedules, tenant.max_active_runs, tenant.weight) == (7, 3, 5)
    assert (tenant.max_emails_per_day, tenant.max_pending_manual_runs) == (11, 13)
    assert list(tenant.allowed_job_types.values_list("name", flat=True)) == ["demo.sleep"]


def test_create_worker_token_command__token_works_only_on_worker_endpoints(db):
    out = StringIO()
    call_command("create_worker_token", "w1", stdout=out)
    printed = _last_json_line(out.getvalue())
    assert set(printed) == {"workerId", "token"}
    assert ApiToken.objects.get(pk=printed["workerId"]).kind == "worker"
    worker = api_client(printed["token"])
    assert worker.post(WORKER_ENDPOINT, {}).status_code == 204
    assert_error(worker.get(TENANT_ENDPOINT), 403, "forbidden")
