"""Property-based fuzzing of the API against its own OpenAPI schema.

Requests go through the real WSGI application (full middleware stack and URLconf),
authenticated with a real tenant token and a real worker token. Every response must be
a documented status with a documented body, invalid input must be rejected, and no input
may cause a 5xx.
"""

import zlib

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import CRON_BODY
from tests.extreme_instants import instants
from tests.factories import api_client, make_tenant, make_worker_token

# positive_data_acceptance is left out: cron syntax, zone names and job-type parameter
# schemas are validated beyond what the OpenAPI document can express.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

# Every date-time the schema names (preview's after, run-once's runAt, the interval anchor)
# is drawn from instants near year 1 and 9999 with any offset, as well as ordinary ones.
schemathesis.openapi.format("date-time", instants())

# Generating the schema touches no database, so it is loaded at collection time. Django's own
# WSGI handler, not scheduler_project.wsgi: that one is the web process, with its connection pool.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application()).include(path_regex=r"^/api/v1/")

# Filled per test by the `credentials` fixture (each test has its own tenant and tokens).
_tokens: dict[str, str] = {}
# Cases of the coverage phase are built at collection time, before any token exists.
PLACEHOLDER = "token-issued-when-the-test-runs"


def _token_kind(case) -> str:
    return "worker" if case.path.startswith("/api/v1/worker/") else "tenant"


@schema.auth(refresh_interval=None)
class BearerTokens:
    def get(self, case, context):
        return _tokens.get(_token_kind(case), PLACEHOLDER)

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture
def credentials(db):
    tenant = make_tenant("fuzz")
    worker = make_worker_token("fuzz-worker")
    _tokens.update(tenant=tenant.secret, worker=worker.secret)
    client = api_client(tenant)
    schedule = client.post("/api/v1/schedules", CRON_BODY).json()
    run = client.post(f"/api/v1/schedules/{schedule['scheduleId']}/runs", {}).json()
    # Outside Django's test client the handler would close the test transaction's
    # connection at the end of each request; detach that signal like the client does
    # (after the client's last use: it reconnects the signal when it is done).
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {"schedule_id": schedule["scheduleId"], "run_id": run["runId"]}
    _tokens.clear()
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api__conforms_to_its_schema_and_never_answers_5xx(case, credentials):
    for name, real_id in credentials.items():
        # About half the generated ids become real ones, so the code past the 404 is exercised too.
        if name in (case.path_parameters or {}) and zlib.crc32(str(case.path_parameters[name]).encode()) % 2:
            case.path_parameters[name] = real_id
    if (case.headers or {}).get("Authorization") == f"Bearer {PLACEHOLDER}":
        case.headers["Authorization"] = f"Bearer {_tokens[_token_kind(case)]}"
    response = case.call()
    case.validate_response(response, checks=CHECKS)
