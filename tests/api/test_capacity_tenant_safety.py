"""One tenant's future load never turns admission or the forecast against another tenant:
tenant B's every-second schedules (none has run yet) neither make A's modest strict promise
inadmissible (the forecast serves runs in the claim's order: A's strict run is not queued
behind B's load) nor make a strict create or a forecast request slow (their cost is bounded)."""

import time
from datetime import timedelta

import pytest

from runs.capacity.live import slots_report
from kernel.clock import authority_now, instant
from tests.api.conftest import CRON_BODY, assert_error, create_schedule

FORECAST = "/api/v1/capacity/forecast"
# Seconds: a bound on the work (before budgets, these requests took minutes), generous enough
# for a loaded 2-core machine; how fast they answer is measured by bench/admission_cost.py.
ANSWER_WITHIN = 5.0


def _tomorrow_at(hour: int):
    return (authority_now() + timedelta(days=1)).replace(hour=hour, minute=0, second=0, microsecond=0)


@pytest.fixture
def every_second(other_client, settings):
    """B's ten schedules, each due every second from tomorrow 06:00 (none has run yet), and
    eight live short slots: far more work than the slots take from 06:00 on."""
    settings.API_RATE_LIMIT_PER_SECOND = 0
    slots_report("embedded:test:1", {"short": 8})
    anchor = instant(_tomorrow_at(6))
    for n in range(10):
        create_schedule(other_client, name=f"b-{n}", params={"seconds": 0},
                        recurrence={"kind": "interval", "everySeconds": 1, "anchor": anchor})
    return anchor


def _timed(call):
    began = time.monotonic()
    response = call()
    return response, time.monotonic() - began


def test_another_tenants_load__does_not_make_a_modest_strict_promise_inadmissible(client, every_second):
    """A's 07:00 run starts at the first slot B's runs free (within 5 s): its one-hour promise
    is kept, whatever B has queued."""
    body = {**CRON_BODY, "name": "daily", "recurrence": {"kind": "cron", "cron": "0 7 * * *"},
            "startDeadlineSeconds": 3600}
    response, took = _timed(lambda: client.post("/api/v1/schedules", body))
    assert response.status_code == 201, response.content
    assert took < ANSWER_WITHIN


def test_another_tenants_strict_wave__shares_the_slots_fairly(client, other_client):
    """B's 30 strict runs at 09:00 do not queue A's behind them: of the 10 slots, A's run gets
    one at once (equal weights). Served after all of B's it would start at 15 s."""
    slots_report("embedded:test:1", {"short": 10})
    daily = {"kind": "cron", "cron": "0 9 * * *"}
    for n in range(30):
        create_schedule(other_client, name=f"b-{n}", recurrence=daily, startDeadlineSeconds=86400)
    response = client.post("/api/v1/schedules", {**CRON_BODY, "recurrence": daily, "startDeadlineSeconds": 1})
    assert response.status_code == 201, response.content
    # B's own next strict schedule at 09:00 is queued behind B's 30 runs (and shares the slots
    # with A's): it cannot start within 10 s.
    error = assert_error(other_client.post("/api/v1/schedules", {**CRON_BODY, "recurrence": daily,
                                                                  "startDeadlineSeconds": 10}), 409,
                         "deadline_infeasible")
    assert error["details"]["predictedP99Seconds"] > 10


@pytest.mark.parametrize("who", ["owner", "operator", "another tenant"])
def test_forecast__of_a_week_with_every_second_load__answers_at_once(client, other_client, operator, every_second,
                                                                      who):
    """Seven days of ten every-second schedules are 6 million occurrences: more than one
    forecast simulates. Whoever asks, the request says so at once (400 on `to`) instead of
    working for minutes."""
    asking = {"owner": other_client, "operator": operator, "another tenant": client}[who]
    start = authority_now().replace(second=0, microsecond=0)
    query = {"from": instant(start), "to": instant(start + timedelta(days=7))}
    response, took = _timed(lambda: asking.get(FORECAST, query))
    error = assert_error(response, 400, "invalid_request", "to")
    assert "shorter range" in error["message"]
    assert took < ANSWER_WITHIN


def test_forecast__of_hours_with_every_second_load__answers_in_bounded_time(client, operator, every_second):
    """Two hours of B's load (72,000 occurrences): every minute row for the operator, the
    tenant's own (none) for A, each in bounded time (ANSWER_WITHIN)."""
    start = _tomorrow_at(6) - timedelta(minutes=30)
    query = {"from": instant(start), "to": instant(start + timedelta(hours=2))}
    response, took = _timed(lambda: operator.get(FORECAST, query))
    assert response.status_code == 200, response.content
    minutes = response.json()["minutes"]
    assert len(minutes) == 90 and minutes[0]["due"] == 600 and not minutes[-1]["feasible"]
    assert took < ANSWER_WITHIN
    response, took = _timed(lambda: client.get(FORECAST, query))
    assert response.status_code == 200 and response.json()["minutes"] == []
    assert took < ANSWER_WITHIN


def test_another_tenants_dense_jittered_schedules__leave_a_strict_promise_checkable(client, other_client, settings):
    """B's forty schedules due every second with a minute of jitter each (3.5 million draws a
    day, more than an admission's budget were they drawn one by one) are forecast as their
    rule's instants each shifted by half the jitter, walked once: A's strict daily is checked
    and admitted, not refused as uncheckable (`details.budget`)."""
    settings.API_RATE_LIMIT_PER_SECOND = 0
    slots_report("embedded:test:1", {"short": 400})
    anchor = instant(_tomorrow_at(6))
    for n in range(40):
        create_schedule(other_client, name=f"b-{n}", params={"seconds": 0}, jitterSeconds=60,
                        recurrence={"kind": "interval", "everySeconds": 1, "anchor": anchor})
    body = {**CRON_BODY, "name": "daily", "recurrence": {"kind": "cron", "cron": "0 7 * * *"},
            "startDeadlineSeconds": 3600}
    response = client.post("/api/v1/schedules", body)
    assert response.status_code == 201, response.content
