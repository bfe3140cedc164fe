"""Fixtures of the recovery drills: the chaos suite's real system (child processes, its own
Redis, a moto S3 server) working on private PostgreSQL servers this suite starts."""

import pytest

from tests.chaos.conftest import (  # noqa: F401 - the chaos suite's fixtures, reused
    chaos,
    chaos_redis,
    processes,
    pytest_runtest_makereport,
    redis_server,
)
from tests.recovery.clusters import Cluster, cluster_root, django_on, migrate


@pytest.fixture
def clusters(django_db_blocker):
    """Makes private servers (``clusters(name, **settings)``: initialized, not started),
    all stopped and removed afterwards; this process may use them through Django."""
    with cluster_root() as root, django_db_blocker.unblock():
        yield lambda name, **settings: Cluster(root, name).init(**settings)


@pytest.fixture
def primary(clusters):
    """A started private server with the migrated scheduler database, used by this process
    until the test ends. Request it before ``chaos``: it outlives the child processes."""
    server = clusters("primary")
    server.start()
    server.create_database()
    migrate(server.url())
    with django_on(server.url()):
        yield server
