"""Every error the API can produce has the contract's body and a stable code."""

import json

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import CRON_BODY, assert_error, claim, create_schedule, post_raw, run_once
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db

SCHEDULES = "/api/v1/schedules"


# --- 400 invalid_request: the body itself ----------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"not json",
        b"[]",
        b'"a string"',
        b"42",
        b"null",
        b'{"name": NaN}',
        b'{"name": Infinity}',
        b'{"misfireGraceSeconds": 1e999}',
        b'{"name": "a", "name": "b"}',
        b"{'name': 'single quotes'}",
        b'{"name": "x",}',
        b"\xef\xbb\xbf{}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50 + b"1" + b"}" * 50,
        b'{"name": 1' + b"0" * 5000 + b"}",
    ],
    ids=lambda raw: repr(raw[:30]),
)
def test_malformed_json__is_invalid_request(client, raw):
    assert_error(post_raw(client, SCHEDULES, raw), 400, "invalid_request")


def test_non_utf8_body__is_invalid_request(client):
    assert_error(post_raw(client, SCHEDULES, '{"name": "café"}'.encode("latin-1")), 400, "invalid_request")


def test_non_utf8_charset__is_invalid_request(client):
    response = post_raw(client, SCHEDULES, b"{}", content_type="application/json; charset=latin-1")
    assert_error(response, 400, "invalid_request")


def test_non_json_content_type__is_invalid_request(client):
    response = post_raw(client, SCHEDULES, json.dumps(CRON_BODY).encode(), content_type="text/plain")
    assert_error(response, 400, "invalid_request")


def test_form_encoded_body__is_invalid_request(client):
    response = client.post(SCHEDULES, {"name": "x"}, format="multipart")
    assert_error(response, 400, "invalid_request")


def test_huge_body__is_invalid_request(client):
    raw = b'{"name": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    assert_error(post_raw(client, SCHEDULES, raw), 400, "invalid_request")


@pytest.mark.parametrize("text", ["nul\u0000byte", "lone \ud800 surrogate"])
def test_unstorable_strings__are_invalid_request(client, text):
    raw = json.dumps({**CRON_BODY, "name": text}, ensure_ascii=True).encode()
    assert_error(post_raw(client, SCHEDULES, raw), 400, "invalid_request")
    raw = json.dumps({**CRON_BODY, "params": {text: 1}}, ensure_ascii=True).encode()
    assert_error(post_raw(client, SCHEDULES, raw), 400, "invalid_request")


@pytest.mark.parametrize("missing", ["name", "jobType", "recurrence"])
def test_missing_required_field__names_it(client, missing):
    body = {k: v for k, v in CRON_BODY.items() if k != missing}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_request", field=missing)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"name": 5}, "name"),
        ({"name": None}, "name"),
        ({"name": ["a"]}, "name"),
        ({"jobType": 1}, "jobType"),
        ({"params": "seconds=1"}, "params"),
        ({"params": {"seconds": "one"}}, "params.seconds"),
        ({"params": {"nope": 1}}, "params.nope"),
        ({"recurrence": "0 9 * * *"}, "recurrence"),
        ({"misfirePolicy": "sometimes"}, "misfirePolicy"),
        ({"misfirePolicy": 1}, "misfirePolicy"),
        ({"overlapPolicy": "never"}, "overlapPolicy"),
        ({"misfireGraceSeconds": "60"}, "misfireGraceSeconds"),
        ({"misfireGraceSeconds": -1}, "misfireGraceSeconds"),
        ({"retry": {"maxAttempts": "3"}}, "retry.maxAttempts"),
        ({"retry": {"maxAttempts": 0}}, "retry.maxAttempts"),
        ({"retry": []}, "retry"),
        ({"effects": []}, "effects"),
    ],
)
def test_ill_typed_field__names_it(client, overrides, field):
    assert_error(client.post(SCHEDULES, {**CRON_BODY, **overrides}), 400, "invalid_request", field=field)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"colour": "blue"}, "colour"),
        ({"recurrence": {**CRON_BODY["recurrence"], "second": "0"}}, "recurrence.second"),
        ({"retry": {"maxAttempts": 3, "jitter": True}}, "retry.jitter"),
        ({"effects": {"email": {"to": ["a@example.com"], "bcc": ["b@example.com"]}}}, "effects.email.bcc"),
        ({"effects": {"pigeon": {}}}, "effects.pigeon"),
    ],
)
def test_unknown_field__nested_included__names_it(client, overrides, field):
    assert_error(client.post(SCHEDULES, {**CRON_BODY, **overrides}), 400, "invalid_request", field=field)


# --- 400 invalid_cron / invalid_timezone ---------------------------------------------------------


@pytest.mark.parametrize(
    "cron",
    [
        "not a cron",
        "",
        "* * * *",
        "* * * * * * *",
        "61 * * * *",
        "0 25 * * *",
        "0 9 32 * *",
        "0 9 * 13 *",
        "0 9 * * 8",
        "*/0 * * * *",
        "5-1/-2 * * * *",
        "0 9 * * MON-FRI-SUN",
        "@reboot",
        "1," * 2000 + "1 * * * *",
        "\u0660 * * * *",
        "0 9 * * 1-5 extra",
    ],
    ids=lambda c: repr(c[:24]),
)
def test_absurd_cron__is_invalid_cron(client, cron):
    body = {**CRON_BODY, "recurrence": {"kind": "cron", "cron": cron, "timezone": "UTC"}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_cron")


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "", "America/New York", "../../etc/passwd", "localtime", "EST5EDT,M3", "x" * 500]
)
def test_bad_timezone__is_invalid_timezone(client, zone):
    body = {**CRON_BODY, "recurrence": {"kind": "cron", "cron": "0 9 * * *", "timezone": zone}}
    assert_error(client.post(SCHEDULES, body), 400, "invalid_timezone")


def test_preview_with_bad_cron__is_invalid_cron(client):
    response = client.post(SCHEDULES + "/preview", {"recurrence": {"kind": "cron", "cron": "nope"}})
    assert_error(response, 400, "invalid_cron")


# --- 401 / 403 ---------------------------------------------------------------------------------


def test_unauthenticated(anonymous):
    assert_error(anonymous.post(SCHEDULES, CRON_BODY), 401, "unauthenticated")


def test_forbidden_wrong_kind(client, worker_client):
    assert_error(client.post("/api/v1/worker/claim", {}), 403, "forbidden")
    assert_error(worker_client.get(SCHEDULES), 403, "forbidden")


def test_job_type_forbidden(db):
    restricted = api_client(make_tenant("restricted", job_types=["demo.sleep"]))
    response = restricted.post(SCHEDULES, {**CRON_BODY, "jobType": "report.sales", "params": {}})
    assert_error(response, 403, "job_type_forbidden")


def test_unknown_job_type__is_invalid_request(client):
    assert_error(client.post(SCHEDULES, {**CRON_BODY, "jobType": "no.such"}), 400, "invalid_request", "jobType")


# --- 404 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/api/v1/schedules/sch_doesnotexist"),
        ("delete", "/api/v1/schedules/sch_doesnotexist"),
        ("post", "/api/v1/schedules/sch_doesnotexist/pause"),
        ("post", "/api/v1/schedules/sch_doesnotexist/resume"),
        ("get", "/api/v1/schedules/sch_doesnotexist/runs"),
        ("post", "/api/v1/schedules/sch_doesnotexist/runs"),
        ("get", "/api/v1/runs/run_doesnotexist"),
        ("post", "/api/v1/runs/run_doesnotexist/cancel"),
        ("get", "/api/v1/runs/run_doesnotexist/result"),
        ("get", "/api/v1/schedules/%00"),
        ("get", "/api/v1/runs/%F0%9F%92%A9"),
        ("get", "/api/v1/runs/%FF%FE"),
        ("get", "/api/v1/schedules/..%2F..%2Fetc"),
        ("get", "/api/v1/runs/" + "r" * 300),
    ],
)
def test_unknown_id__is_not_found(client, method, path):
    assert_error(getattr(client, method)(path), 404, "not_found")


@pytest.mark.parametrize(
    "path",
    ["/api/v1/nope", "/api/v1/schedules/", "/api/v2/schedules", "/api/v1/runs/", "/nope", "/api/v1/worker/claim/"],
)
def test_unknown_url__is_not_found_with_contract_body(client, path):
    assert_error(client.get(path), 404, "not_found")


# --- 405 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("put", "/api/v1/schedules"),
        ("delete", "/api/v1/schedules"),
        ("get", "/api/v1/schedules/preview"),
        ("put", "/api/v1/schedules/sch_x"),
        ("get", "/api/v1/schedules/sch_x/pause"),
        ("delete", "/api/v1/runs/run_x"),
        ("get", "/api/v1/runs/run_x/cancel"),
    ],
)
def test_wrong_method__has_contract_body(client, method, path):
    response = getattr(client, method)(path)
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"]


def test_wrong_method_on_worker_endpoint__has_contract_body(worker_client):
    assert_error(worker_client.get("/api/v1/worker/claim"), 405, "method_not_allowed")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "options"])
@pytest.mark.parametrize("path", ["/api/v1/objects/any-token", "/metrics", "/api/schema/", "/api/docs/",
                                  "/api/redoc/"])
def test_wrong_method_outside_drf__has_contract_body_not_a_csrf_page(method, path):
    """The download, /metrics and the served docs are not DRF views of the API: a write
    method is 405 with Allow and the contract's body, never Django's HTML CSRF page."""
    browser = APIClient(enforce_csrf_checks=True)  # as a real server checks CSRF
    response = getattr(browser, method)(path, b"x", content_type="application/json")
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"


# --- 409 ------------------------------------------------------------------------------------------


def test_idempotency_conflict(client):
    first = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == 201
    response = client.post(SCHEDULES, {**CRON_BODY, "name": "other"}, HTTP_IDEMPOTENCY_KEY="k1")
    assert_error(response, 409, "idempotency_conflict")


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "a\tb"])
def test_unusable_idempotency_key__is_invalid_request(client, key):
    response = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY=key)
    assert_error(response, 400, "invalid_request", field="Idempotency-Key")


def test_revision_conflict__details_hold_current_schedule(client, schedule):
    path = f"{SCHEDULES}/{schedule['scheduleId']}"
    assert client.patch(path, {"expectedRevision": 1, "name": "v2"}).status_code == 200
    error = assert_error(client.patch(path, {"expectedRevision": 1, "name": "v3"}), 409, "revision_conflict")
    assert error["details"]["current"] == client.get(path).json()
    assert error["details"]["current"]["revision"] == 2


def test_invalid_state__cancel_terminal_run(client, queued_run):
    path = f"/api/v1/runs/{queued_run['runId']}/cancel"
    assert client.post(path).json()["state"] == "canceled"
    assert_error(client.post(path), 409, "invalid_state")


def test_invalid_state__result_before_success(client, queued_run):
    assert_error(client.get(f"/api/v1/runs/{queued_run['runId']}/result"), 409, "invalid_state")


def test_stale_fence(client, queued_run, worker_client):
    claimed = claim(worker_client)
    response = worker_client.post(
        "/api/v1/worker/heartbeat",
        {"runId": claimed["runId"], "attemptId": claimed["attemptId"], "fence": claimed["fence"] + 1},
    )
    assert_error(response, 409, "stale_fence")


# --- 429 ------------------------------------------------------------------------------------------


def test_quota_exceeded__nothing_accepted(db):
    tenant = make_tenant("tiny", max_schedules=1)
    client = api_client(tenant)
    create_schedule(client)
    assert_error(client.post(SCHEDULES, {**CRON_BODY, "name": "second"}), 429, "quota_exceeded")
    assert len(client.get(SCHEDULES).json()["results"]) == 1


# --- Precedence -----------------------------------------------------------------------------------


def test_precedence__invalid_body_before_not_found(client):
    response = client.patch(f"{SCHEDULES}/sch_doesnotexist", data=b"{oops", content_type="application/json")
    assert_error(response, 400, "invalid_request")
    response = client.post(f"{SCHEDULES}/sch_doesnotexist/runs", {"params": "nope"})
    assert_error(response, 400, "invalid_request")


def test_precedence__invalid_body_before_job_type_forbidden(db):
    restricted = api_client(make_tenant("restricted", job_types=["demo.sleep"]))
    response = restricted.post(SCHEDULES, {**CRON_BODY, "jobType": "report.sales", "bogus": 1})
    assert_error(response, 400, "invalid_request")


def test_precedence__job_type_forbidden_before_quota(db):
    restricted = api_client(make_tenant("restricted", job_types=["demo.sleep"], max_schedules=0))
    response = restricted.post(SCHEDULES, {**CRON_BODY, "jobType": "report.sales", "params": {}})
    assert_error(response, 403, "job_type_forbidden")


def test_precedence__replay_before_quota(db):
    client = api_client(make_tenant("tiny", max_schedules=1))
    first = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="once")
    assert first.status_code == 201
    replay = client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="once")
    assert replay.status_code in (200, 201)
    assert replay.json()["scheduleId"] == first.json()["scheduleId"]


def test_precedence__idempotency_conflict_before_quota(db):
    client = api_client(make_tenant("tiny", max_schedules=1))
    assert client.post(SCHEDULES, CRON_BODY, HTTP_IDEMPOTENCY_KEY="once").status_code == 201
    response = client.post(SCHEDULES, {**CRON_BODY, "name": "changed"}, HTTP_IDEMPOTENCY_KEY="once")
    assert_error(response, 409, "idempotency_conflict")


def test_precedence__run_once_replay_returns_same_run(client, schedule):
    first = run_once(client, schedule["scheduleId"], HTTP_IDEMPOTENCY_KEY="r1")
    again = client.post(f"{SCHEDULES}/{schedule['scheduleId']}/runs", {}, HTTP_IDEMPOTENCY_KEY="r1")
    assert again.status_code in (200, 201)
    assert again.json()["runId"] == first["runId"]


# --- Query strings and content negotiation ----------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/api/v1/schedules?colour=blue", "/api/v1/schedules?format=json", "/api/v1/runs/run_x?limit=5"]
)
def test_unknown_query_parameter__is_invalid_request(client, path):
    error = assert_error(client.get(path), 400, "invalid_request")
    assert error["details"]["field"] in ("colour", "format", "limit")


@pytest.mark.parametrize("cursor", ["%FF", "%00", "%C3%28"])
def test_undecodable_query_string__is_invalid_request(client, cursor):
    assert_error(client.get(f"{SCHEDULES}?cursor={cursor}"), 400, "invalid_request", field="cursor")


def test_non_ascii_token__is_unauthenticated(anonymous):
    anonymous.credentials(HTTP_AUTHORIZATION="Bearer caf\u00e9")
    assert_error(anonymous.get(SCHEDULES), 401, "unauthenticated")


def test_unknown_query_parameter__after_authentication(anonymous):
    assert_error(anonymous.get("/api/v1/schedules?format=xml"), 401, "unauthenticated")


def test_errors_are_json_whatever_the_accept_header(client, anonymous):
    assert_error(anonymous.get(SCHEDULES, HTTP_ACCEPT="text/html"), 401, "unauthenticated")
    response = client.get(SCHEDULES, HTTP_ACCEPT="application/xml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
