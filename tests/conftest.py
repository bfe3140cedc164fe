import os
import secrets

import pytest
from django.conf import settings as django_settings
from hypothesis import settings as hypothesis_settings

# Web, workers and loops refuse to start without a signing key. The suite has one of its own,
# in this process and, through the environment, in every process a test starts (e2e, chaos).
os.environ.setdefault("SECRET_KEY", "test-only-" + secrets.token_urlsafe(32))
django_settings.SECRET_KEY = os.environ["SECRET_KEY"]

hypothesis_settings.register_profile("ci", deadline=None, print_blob=True)
hypothesis_settings.load_profile("ci")


@pytest.fixture
def file_objects(settings, tmp_path):
    """The process-wide object store is a fresh directory of this test's, ready for use.
    Opt in with ``pytest.mark.usefixtures("file_objects")``."""
    from objectstore import get_object_store

    settings.OBJECT_STORE_URL = f"file://{tmp_path}/objects"
    get_object_store.cache_clear()
    get_object_store().ensure_ready()
    yield
    get_object_store.cache_clear()


@pytest.fixture
def tenant(db):
    from tests.factories import make_tenant

    return make_tenant("acme")
from tests.servers import fresh_database_url, moto_server, private_redis, redis_url, s3_store, file_store  # noqa: F401


@pytest.fixture(autouse=True)
def fresh_capacity_gauges():
    """/metrics computes scheduler_required_slots afresh in every test: its per-process cache
    would otherwise carry one test's database into the next."""
    from runs.capacity.gauges import forget_cached_figures

    forget_cached_figures()
