"""The API fixtures (tenant clients, worker clients, the file object store)."""

import pytest

from tests.api.conftest import client, file_objects, other_client, other_tenant, worker, worker_client

__all__ = ["client", "file_objects", "other_client", "other_tenant", "worker", "worker_client"]


@pytest.fixture(autouse=True)
def forecast_every_pass(settings):
    """Each pass of a test forecasts (a process otherwise forecasts once a minute)."""
    settings.HEALTH_FORECAST_INTERVAL_SECONDS = 0
