import pytest
from hypothesis import settings as hypothesis_settings

hypothesis_settings.register_profile("ci", deadline=None, print_blob=True)
hypothesis_settings.load_profile("ci")


@pytest.fixture
def tenant(db):
    from tests.factories import make_tenant

    return make_tenant("acme")
from tests.servers import moto_server, s3_store, file_store  # noqa: F401
