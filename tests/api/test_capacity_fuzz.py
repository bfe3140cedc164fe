"""Hostile values in the capacity fields: `startDeadlineSeconds` and `jitterSeconds` (create
and PATCH), backfill's `from`/`to`, the forecast's `?from=&to=`. Each is a 400 with the
contract's error body naming the field, or (for the extreme but valid ones) an answer; never a
500, and a refused request changes nothing."""

import json
from urllib.parse import quote

import pytest

from runs.capacity.live import slots_report
from runs.models import Run
from schedules.models import Schedule, ScheduleRevision
from tests.api.conftest import CRON_BODY, assert_error, create_schedule, post_raw

SCHEDULES = "/api/v1/schedules"
FORECAST = "/api/v1/capacity/forecast"
PAST = "2026-01-01T00:00:00Z"

# Values no integer field of the contract accepts (0 and null are legal for one of the two
# fields and are checked by test_capacity_api).
NOT_AN_ALLOWED_INTEGER = [
    -1, -(2**63), 2**63, 10**30, 10**400, 86401 * 1000, 1.5, 1.0, -0.0, 1e308, True, False, "10", "", " ",
    "\u0000", "10\r\n", "\u0661\u0660", "\uff11\uff10", "1e3", [], [10], {}, {"seconds": 10},
]
# Instants and non-instants a body may carry where an instant is expected.
NOT_AN_INSTANT = [
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+00:00", "2026-01-01T00:00:00", "2026-01-01", "2026-01-01T00:00:00Z\r\n",
    "2026-01-01T00:00:00Z\nX-Injected: 1", "\r\n", "2026-01-01T00:00:00\u0000Z", "\u0000",
    "\u0662\u0660\u0662\u0666-01-01T00:00:00Z", "\uff12\uff10\uff12\uff16-01-01T00:00:00Z", "2026-01-01T00:00:00\u200bZ",
    "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00+24:00", "10000-01-01T00:00:00Z",
    "-2026-01-01T00:00:00Z", "9" * 5000, "", 0, -1, 10**30, 1.5, 1e308, True, False, None, [], [PAST], {},
    {"at": PAST},
]


def _ids(value) -> str:
    return repr(value)[:40]


@pytest.fixture
def strict_client(client, settings):
    settings.API_RATE_LIMIT_PER_SECOND = 0  # many requests with one token
    slots_report("embedded:test:1", {"short": 100})
    return client


def _stored(schedule_id: str) -> tuple:
    """What a refused request must leave as it was."""
    row = Schedule.objects.get(id=schedule_id)
    return (row.revision, row.start_deadline_seconds, row.jitter_seconds, row.next_run_at,
            ScheduleRevision.objects.filter(schedule_id=schedule_id).count())


@pytest.mark.parametrize("field", ["startDeadlineSeconds", "jitterSeconds"])
@pytest.mark.parametrize("value", NOT_AN_ALLOWED_INTEGER, ids=_ids)
def test_create__hostile_capacity_field_is_400_and_creates_nothing(strict_client, field, value):
    response = strict_client.post(SCHEDULES, {**CRON_BODY, field: value})
    assert_error(response, 400, "invalid_request", field)
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("field", ["startDeadlineSeconds", "jitterSeconds"])
@pytest.mark.parametrize("value", NOT_AN_ALLOWED_INTEGER, ids=_ids)
def test_patch__hostile_capacity_field_is_400_and_changes_nothing(strict_client, field, value):
    schedule = create_schedule(strict_client, startDeadlineSeconds=3600, jitterSeconds=5)
    before = _stored(schedule["scheduleId"])
    response = strict_client.patch(f"{SCHEDULES}/{schedule['scheduleId']}", {"expectedRevision": 1, field: value})
    assert_error(response, 400, "invalid_request", field)
    assert _stored(schedule["scheduleId"]) == before


@pytest.mark.parametrize("raw", [b"1e999", b"-1e999", b"NaN", b"Infinity", b"1" * 5000, b"0x10", b"010", b"+1"],
                         ids=_ids)
@pytest.mark.parametrize("field", ["startDeadlineSeconds", "jitterSeconds"])
def test_create_and_patch__unparsable_numbers_are_400_and_change_nothing(strict_client, field, raw):
    body = json.dumps({**CRON_BODY, field: 0}).encode().replace(f'"{field}": 0'.encode(), f'"{field}": '.encode() + raw)
    assert_error(post_raw(strict_client, SCHEDULES, body), 400, "invalid_request")
    schedule = create_schedule(strict_client)
    before = _stored(schedule["scheduleId"])
    patch = b'{"expectedRevision": 1, "' + field.encode() + b'": ' + raw + b"}"
    response = post_raw(strict_client, f"{SCHEDULES}/{schedule['scheduleId']}", patch, method="PATCH")
    assert_error(response, 400, "invalid_request")
    assert _stored(schedule["scheduleId"]) == before and Schedule.objects.count() == 1


@pytest.mark.parametrize("field", ["from", "to"])
@pytest.mark.parametrize("value", NOT_AN_INSTANT, ids=_ids)
def test_backfill__hostile_instant_is_400_and_creates_nothing(strict_client, field, value):
    schedule = create_schedule(strict_client, recurrence={"kind": "cron", "cron": "0 * * * *"})
    body = {"from": PAST, "to": "2026-01-02T00:00:00Z", field: value}
    response = strict_client.post(f"{SCHEDULES}/{schedule['scheduleId']}/backfill", body)
    assert_error(response, 400, "invalid_request", field)
    assert not Run.objects.exists()


@pytest.mark.parametrize("body", [
    {"from": "0001-01-02T00:00:00Z", "to": "0001-01-03T00:00:00Z"},
    {"from": "0001-01-02T00:00:00Z", "to": PAST},
    {"from": "0001-01-02T00:00:00-23:59", "to": "0001-01-02T00:00:00+23:59"},
    {"from": PAST, "to": "9999-12-30T23:59:59.999999Z"},
], ids=_ids)
@pytest.mark.parametrize("recurrence", [
    {"kind": "cron", "cron": "0 0 1 1 *"}, {"kind": "cron", "cron": "* * * * *", "timezone": "Pacific/Kiritimati"},
    {"kind": "interval", "everySeconds": 86400, "anchor": "0001-01-02T00:00:00Z"},
    {"kind": "once", "at": "2025-06-01T00:00:00Z"},
], ids=lambda r: r.get("cron") or r["kind"])
def test_backfill__extreme_but_valid_ranges_are_answered_or_refused_never_500(strict_client, body, recurrence):
    schedule = create_schedule(strict_client, recurrence=recurrence)
    response = strict_client.post(f"{SCHEDULES}/{schedule['scheduleId']}/backfill", body)
    if response.status_code != 200:
        assert_error(response, 400, "invalid_request", "to")
        assert not Run.objects.exists()
    else:
        assert response.json()["instants"] <= 1000 and Run.objects.count() == response.json()["created"]


FORECAST_NOT_AN_INSTANT = [
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "2026-01-01T00:00:00",
    "2026-01-01", "%0D%0A", "2026-01-01T00:00:00Z%0D%0AX-Injected:%201", "%00", "2026-01-01T00:00:00%00Z",
    "%D9%A2%D9%A0%D9%A2%D9%A6-01-01T00:00:00Z", "%FF%FE", "%C3%28", "9" * 5000, "-1", "1e10", "true", "null",
    "[]", "", "%20", "2026-01-01T00:00:00Z%20", "2026-01-01T00:00:00Z%00junk", "2026-01-01%0000:00:00Z",
]


@pytest.mark.parametrize("field", ["from", "to"])
@pytest.mark.parametrize("raw", FORECAST_NOT_AN_INSTANT, ids=_ids)
def test_forecast__hostile_range_is_400_on_its_field(strict_client, operator, field, raw):
    other = "to" if field == "from" else "from"
    query = f"{field}={raw}&{other}={quote('2030-01-07T09:00:00Z' if other == 'to' else '2030-01-07T08:00:00Z')}"
    for caller in (operator, strict_client):
        assert_error(caller.get(f"{FORECAST}?{query}"), 400, "invalid_request", field)


@pytest.mark.parametrize("query", [
    {"from": "0001-01-02T00:00:00Z"}, {"from": "0001-01-02T00:00:00Z", "to": "0001-01-09T00:00:00Z"},
    {"from": "9999-12-30T23:00:00Z"}, {"from": "9999-12-24T00:00:00Z", "to": "9999-12-30T23:59:59.999999Z"},
    {"from": "9999-12-30T23:59:59.999999Z"}, {"from": "2030-01-07T00:00:00+23:59", "to": "2030-01-07T00:00:00-23:59"},
], ids=_ids)
def test_forecast__extreme_but_valid_ranges_are_answered(strict_client, operator, query):
    for recurrence in ({"kind": "cron", "cron": "* * * * *", "timezone": "Pacific/Kiritimati"},
                       {"kind": "interval", "everySeconds": 60, "anchor": "0001-01-02T00:00:00Z"},
                       {"kind": "cron", "cron": "59 23 30 12 *", "timezone": "Etc/GMT+12"}):
        create_schedule(strict_client, name=str(recurrence), recurrence=recurrence, jitterSeconds=3600)
    for caller in (operator, strict_client):
        response = caller.get(FORECAST, query)
        assert response.status_code == 200, response.content


@pytest.mark.parametrize("query, field", [
    ("from=a&from=b", "from"), ("from=2030-01-07T08:00:00Z&from=x", "from"),
    ("from=2030-01-07T08:00:00Z&to=x&to=2030-01-07T09:00:00Z", None),
    ("from=x&from=2030-01-07T08:00:00Z", None),
])
def test_forecast__repeated_parameter_is_judged_by_its_last_value(operator, query, field):
    """A repeated parameter is read as its last value (Django's QueryDict), refused when that one is."""
    response = operator.get(f"{FORECAST}?{query}")
    if field is None:
        assert response.status_code == 200, response.content
    else:
        assert_error(response, 400, "invalid_request", field)
