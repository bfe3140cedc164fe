import pytest

from tests.concurrency.harness import Sessions


@pytest.fixture(autouse=True)
def file_objects(file_objects):
    """Every race here may publish results: the shared file store fixture, for the whole folder."""
    return file_objects


@pytest.fixture
def sessions(transactional_db):
    """Simulated processes, each with its own PostgreSQL connection (closed before the flush)."""
    factory = Sessions()
    yield factory
    factory.close_all()
