"""One reading of an instant for every field and query parameter that takes one: the
contract's form (`T` between date and time, then `Z` or an offset) is accepted; a space, any
other separator or a space before the offset is 400 on that field, and nothing is stored."""

from urllib.parse import quote

import pytest

from runs.capacity.live import slots_report
from runs.models import Run
from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, assert_error, create_schedule

SCHEDULES = "/api/v1/schedules"
PAST = "2026-01-01T00:00:00Z"
WITH_A_SPACE = [
    "2026-01-01 00:00:00Z", "2026-01-01T00:00:00 Z", "2026-01-01 00:00:00+00:00", "2026-01-01T00:00:00 +00:00",
    " 2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z ", "2026-01-01X00:00:00Z", "2026-01-01_00:00:00Z",
    "2026-01-01T00:00:00\tZ", "2026-01-01\u00a000:00:00Z", "2026-01-01T00:00:00Z\x00",
]
ACCEPTED = ["2026-01-01T00:00:00Z", "2026-01-01t00:00:00z", "2026-01-01T01:30:00.25+01:30", "2026-01-01T00:00:00-00:00",
            "2025-12-31T19:00:00-05:00"]


@pytest.fixture
def tenant_client(client, settings):
    settings.API_RATE_LIMIT_PER_SECOND = 0  # many requests with one token
    slots_report("embedded:test:1", {"short": 100})
    return client


def _body_fields(client):
    """(method, path, body for a value, field) for every instant a request body carries."""
    schedule = create_schedule(client, name="target")
    sid = schedule["scheduleId"]
    interval = {"kind": "interval", "everySeconds": 60}
    return [
        ("post", "/api/v1/schedules/preview", lambda v: {"recurrence": CRON_BODY["recurrence"], "after": v}, "after"),
        ("post", f"{SCHEDULES}/{sid}/runs", lambda v: {"runAt": v}, "runAt"),
        ("post", SCHEDULES, lambda v: {**CRON_BODY, "recurrence": {**interval, "anchor": v}}, "recurrence.anchor"),
        ("post", SCHEDULES, lambda v: {**CRON_BODY, "recurrence": {"kind": "once", "at": v}}, "recurrence.at"),
        ("patch", f"{SCHEDULES}/{sid}", lambda v: {"expectedRevision": 1, "recurrence": {**interval, "anchor": v}},
         "recurrence.anchor"),
        ("post", f"{SCHEDULES}/{sid}/backfill", lambda v: {"from": v, "to": PAST}, "from"),
        ("post", f"{SCHEDULES}/{sid}/backfill", lambda v: {"from": "2025-12-31T00:00:00Z", "to": v}, "to"),
    ]


def _query_fields(client):
    """(path, query for a value, field) for every instant a query string carries."""
    sid = create_schedule(client, name="target")["scheduleId"]
    return [
        ("/api/v1/runs", lambda v: f"since={quote(v)}", "since"),
        (f"{SCHEDULES}/{sid}/preview", lambda v: f"after={quote(v)}", "after"),
        ("/api/v1/capacity/forecast", lambda v: f"from={quote(v)}", "from"),
        ("/api/v1/capacity/forecast", lambda v: f"from=2025-12-31T23:00:00Z&to={quote(v)}", "to"),
    ]


def _stored(client):
    return Schedule.objects.count(), Run.objects.count(), [s.revision for s in Schedule.objects.order_by("id")]


@pytest.mark.parametrize("value", WITH_A_SPACE, ids=repr)
def test_body__an_instant_with_a_space_or_another_separator_is_400_on_its_field(tenant_client, value):
    for method, path, body, field in _body_fields(tenant_client):
        before = _stored(tenant_client)
        response = getattr(tenant_client, method)(path, body(value))
        assert_error(response, 400, "invalid_request", field)
        assert _stored(tenant_client) == before, (method, path)


@pytest.mark.parametrize("value", WITH_A_SPACE, ids=repr)
def test_query__an_instant_with_a_space_or_another_separator_is_400_on_its_field(tenant_client, value):
    for path, query, field in _query_fields(tenant_client):
        assert_error(tenant_client.get(f"{path}?{query(value)}"), 400, "invalid_request", field)


@pytest.mark.parametrize("value", ACCEPTED)
def test_instants_in_the_contracts_form_are_accepted_everywhere(tenant_client, value):
    for method, path, body, field in _body_fields(tenant_client):
        if field in ("from", "to"):  # a backfill range needs two instants in order
            continue
        response = getattr(tenant_client, method)(path, body(value))
        assert response.status_code in (200, 201), (path, field, response.content)
    for path, query, field in _query_fields(tenant_client):
        assert tenant_client.get(f"{path}?{query(value)}").status_code == 200, (path, field)
