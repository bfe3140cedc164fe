import pytest

from tests.concurrency.harness import Sessions


@pytest.fixture(autouse=True)
def file_objects(settings, tmp_path):
    from objectstore import get_object_store

    settings.OBJECT_STORE_URL = f"file://{tmp_path}/objects"
    get_object_store.cache_clear()
    yield
    get_object_store.cache_clear()


@pytest.fixture
def sessions(transactional_db):
    """Simulated processes, each with its own PostgreSQL connection (closed before the flush)."""
    factory = Sessions()
    yield factory
    factory.close_all()
