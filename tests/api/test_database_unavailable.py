"""With the database out of reach, the API and the other views answer 503 with Retry-After
and the contract's error body, never 500; the next request after it is back succeeds."""

from contextlib import contextmanager

import pytest
from django.db import connection

from tests.factories import api_client
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def database_down():
    """Every new connection goes to a port nothing listens on (a real refused connection)."""
    real_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = str(free_port())
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = real_port


def assert_unavailable(response):
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "unavailable"


def test_api__database_unreachable__503_retry_after_then_recovers(tenant):
    client = api_client(tenant)
    assert client.get("/api/v1/schedules").status_code == 200
    with database_down():
        assert_unavailable(client.get("/api/v1/schedules"))
        assert_unavailable(client.post("/api/v1/schedules/preview", {"recurrence": {"kind": "cron", "cron": "* * * * *"}}))
    assert client.get("/api/v1/schedules").status_code == 200


def test_views_outside_the_api__database_unreachable__503():
    assert api_client().get("/metrics").status_code == 200
    with database_down():
        assert_unavailable(api_client().get("/metrics"))
