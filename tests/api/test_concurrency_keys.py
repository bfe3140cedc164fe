"""Concurrency keys through the API: the schedule field, the limits (PUT, GET, DELETE
/api/v1/concurrency-keys/{key}), and the claim holding them: never more attempts of a key
running than its limit (1 unless set), the others waiting queued with pendingReason
concurrency_key, the tenant's other runs claimed meanwhile, other tenants untouched."""

import pytest

from runs import authority
from runs.models import Run, RunState
from schedules.models import Tenant
from tests.api.conftest import CRON_BODY, assert_error, create_schedule, run_once
from tests.authority_steps import REPORT, complete_success, stage

KEYS = "/api/v1/concurrency-keys"


def _keyed(client, key, name, **extra):
    return create_schedule(client, name=name, concurrencyKey=key, overlapPolicy="allow", **extra)["scheduleId"]


def _claim(n: int) -> list[Run]:
    return authority.claim_many(n=n, worker_label="test", lease_seconds=300)


def _pending_reason(client, run_id):
    return client.get(f"/api/v1/runs/{run_id}").json()["pendingReason"]


def _finish(run: Run) -> None:
    complete_success(run.id, run.current_attempt_id, run.fence, stage(run, REPORT))


def test_schedule_field__round_trip__null_clears__revisions_show_it(client):
    schedule = create_schedule(client, concurrencyKey="db.migrations:eu-1")
    assert schedule["concurrencyKey"] == "db.migrations:eu-1"
    assert Tenant.objects.get(name="acme").uses_concurrency_keys
    path = f"/api/v1/schedules/{schedule['scheduleId']}"
    cleared = client.patch(path, {"expectedRevision": 1, "concurrencyKey": None}).json()
    assert cleared["concurrencyKey"] is None
    revisions = client.get(f"{path}/revisions").json()["results"]
    assert [r["concurrencyKey"] for r in sorted(revisions, key=lambda r: r["revision"])] == ["db.migrations:eu-1", None]
    assert create_schedule(client, name="plain")["concurrencyKey"] is None


@pytest.mark.parametrize("key", ["a/b", "has space", "bell\x07", "\u202eevil", "-leading", "x" * 101, 7, ["k"]])
def test_schedule_field__hostile_keys__400_naming_it(client, key):
    response = client.post("/api/v1/schedules", {**CRON_BODY, "concurrencyKey": key})
    assert_error(response, 400, "invalid_request", "concurrencyKey")


@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": -1}, {"limit": 10**9}, {"limit": "2"}, {"limit": 1.5},
                                  {}, {"limit": 2, "extra": 1}])
def test_limit__hostile_bodies__400_naming_the_field(client, body):
    response = client.put(f"{KEYS}/reports", body)
    assert_error(response, 400, "invalid_request")
    assert client.get(f"{KEYS}/reports").status_code == 404  # nothing stored


def test_limit__hostile_path_keys__400_naming_key(client):
    for key in ("bad%07key", "%E2%80%AEx", "." + "x" * 10, "x" * 101):
        assert_error(client.put(f"{KEYS}/{key}", {"limit": 2}), 400, "invalid_request", "key")


def test_limit__set__read__listed__removed(client, other_client):
    _keyed(client, "reports", "r1")
    assert client.get(f"{KEYS}/reports").json() == {
        "key": "reports", "limit": 1, "limitSet": False, "running": 0, "schedules": 1}
    response = client.put(f"{KEYS}/reports", {"limit": 3})
    assert response.status_code == 200, response.content
    assert response.json() == {"key": "reports", "limit": 3, "limitSet": True, "running": 0, "schedules": 1}
    assert client.put(f"{KEYS}/exports", {"limit": 2}).json()["schedules"] == 0
    assert [k["key"] for k in client.get(KEYS).json()["results"]] == ["exports", "reports"]
    assert other_client.get(KEYS).json()["results"] == []  # another tenant's keys are its own
    assert other_client.get(f"{KEYS}/reports").status_code == 404
    assert other_client.delete(f"{KEYS}/reports").status_code == 404
    assert client.delete(f"{KEYS}/reports").status_code == 204
    assert client.get(f"{KEYS}/reports").json()["limit"] == 1
    assert client.delete(f"{KEYS}/reports").status_code == 404


def test_claim__a_key_runs_one_at_a_time_by_default__the_others_wait_with_their_reason(client):
    first, second = _keyed(client, "reports", "r1"), _keyed(client, "reports", "r2")
    runs = [run_once(client, first)["runId"], run_once(client, second)["runId"], run_once(client, first)["runId"]]
    [claimed] = _claim(3)
    assert claimed.id == runs[0]
    waiting = runs[1:]
    assert [_pending_reason(client, run_id) for run_id in waiting] == ["concurrency_key"] * 2
    listed = client.get(f"/api/v1/schedules/{second}/runs").json()["results"]
    assert [r["pendingReason"] for r in listed] == ["concurrency_key"]
    assert client.get(f"{KEYS}/reports").json()["running"] == 1
    assert _claim(3) == []

    _finish(claimed)
    [next_one] = _claim(3)
    assert next_one.id == runs[1]
    assert _pending_reason(client, runs[1]) is None


def test_claim__a_raised_limit__more_at_once__never_more_than_it(client):
    key = _keyed(client, "etl", "etl")
    runs = [run_once(client, key)["runId"] for _ in range(5)]
    client.put(f"{KEYS}/etl", {"limit": 3})
    assert len(_claim(5)) == 3
    assert Run.objects.filter(id__in=runs, state=RunState.RUNNING).count() == 3
    client.put(f"{KEYS}/etl", {"limit": 2})  # lowered below what runs: none more until below it
    assert _claim(5) == []
    assert _pending_reason(client, runs[4]) == "concurrency_key"


def test_claim__the_tenants_other_runs_are_not_held_behind_a_full_key(client):
    """Older runs of a full key never take the tenant's share: its unkeyed run, due later,
    is claimed by a claim of one."""
    keyed = _keyed(client, "reports", "r1")
    plain = create_schedule(client, name="plain", overlapPolicy="allow")["scheduleId"]
    keyed_runs = [run_once(client, keyed)["runId"] for _ in range(4)]
    plain_run = run_once(client, plain)["runId"]
    assert [r.id for r in _claim(1)] == [keyed_runs[0]]
    assert [r.id for r in _claim(1)] == [plain_run]


def test_claim__another_tenants_key_of_the_same_name_is_its_own(client, other_client):
    mine, theirs = _keyed(client, "reports", "mine"), _keyed(other_client, "reports", "theirs")
    runs = {run_once(client, mine)["runId"], run_once(other_client, theirs)["runId"]}
    assert {r.id for r in _claim(4)} == runs


def test_claim__schedules_without_keys__claim_as_before(client):
    plain = create_schedule(client, name="plain", overlapPolicy="allow")["scheduleId"]
    runs = {run_once(client, plain)["runId"] for _ in range(3)}
    assert {r.id for r in _claim(3)} == runs
    assert not Tenant.objects.get(name="acme").uses_concurrency_keys


def test_reading_runs__the_key_is_looked_up_only_for_queued_runs_of_keyed_schedules(client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    plain = create_schedule(client, name="plain", overlapPolicy="allow")["scheduleId"]
    keyed = _keyed(client, "reports", "r1")
    plain_run, keyed_run = run_once(client, plain)["runId"], run_once(client, keyed)["runId"]

    def key_lookups(url):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return sum("concurrencylimit" in q["sql"] for q in queries.captured_queries)

    assert key_lookups(f"/api/v1/runs/{plain_run}") == 0
    assert key_lookups(f"/api/v1/schedules/{plain}/runs") == 0
    assert key_lookups(f"/api/v1/runs/{keyed_run}") == 1
    assert key_lookups(f"/api/v1/schedules/{keyed}/runs") == 1
