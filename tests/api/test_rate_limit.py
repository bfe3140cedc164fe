"""Per-token request rate limit: a burst, then a steady rate; past it 429 rate_limited with
Retry-After, and nothing is accepted."""

import time

import pytest
from django.core.cache import cache

from schedules.models import Schedule
from tests.api.conftest import CRON_BODY, assert_error


@pytest.fixture
def tight_limit(settings):
    settings.API_RATE_LIMIT_PER_SECOND = 2
    settings.API_RATE_LIMIT_BURST = 3
    cache.clear()
    yield settings
    cache.clear()


def test_defaults__100_per_second_with_a_burst_of_200(settings):
    assert (settings.API_RATE_LIMIT_PER_SECOND, settings.API_RATE_LIMIT_BURST) == (100, 200)


def test_rate_limit__past_the_burst_is_429_with_retry_after_and_nothing_accepted(client, tight_limit):
    for _ in range(3):
        assert client.get("/api/v1/schedules").status_code == 200
    response = client.post("/api/v1/schedules", CRON_BODY)
    assert_error(response, 429, "rate_limited")
    assert int(response["Retry-After"]) >= 1
    assert not Schedule.objects.exists()


def test_rate_limit__refills_at_the_steady_rate(client, tight_limit):
    for _ in range(3):
        client.get("/api/v1/schedules")
    assert client.get("/api/v1/schedules").status_code == 429
    time.sleep(0.6)  # one request's worth at 2 per second
    assert client.get("/api/v1/schedules").status_code == 200
    assert client.get("/api/v1/schedules").status_code == 429


def test_rate_limit__is_per_token(client, other_client, worker_client, tight_limit):
    for _ in range(3):
        client.get("/api/v1/schedules")
    assert client.get("/api/v1/schedules").status_code == 429
    assert other_client.get("/api/v1/schedules").status_code == 200
    assert worker_client.post("/api/v1/worker/claim", {}).status_code == 204


def test_rate_limit__authentication_comes_first(anonymous, tight_limit):
    for _ in range(5):
        assert_error(anonymous.get("/api/v1/schedules"), 401, "unauthenticated")


def test_rate_limit__zero_rate_turns_it_off(client, tight_limit):
    tight_limit.API_RATE_LIMIT_PER_SECOND = 0
    for _ in range(10):
        assert client.get("/api/v1/schedules").status_code == 200
