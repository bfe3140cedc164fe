"""The API fixtures (tenant clients, worker clients, the file object store)."""

import pytest

from tests.api.conftest import client, file_objects, other_client, other_tenant, worker, worker_client

__all__ = ["client", "file_objects", "other_client", "other_tenant", "worker", "worker_client"]


@pytest.fixture(autouse=True)
def forecast_every_pass(settings):
    """Each pass of a test forecasts (a process otherwise forecasts once a minute)."""
    settings.HEALTH_FORECAST_INTERVAL_SECONDS = 0


@pytest.fixture(autouse=True)
def a_fresh_process():
    """Each test's first pass is a process's first: it looks back HEALTH_LOOKBACK_SECONDS."""
    from runs.health import evaluation

    evaluation._last_pass["at"] = None
