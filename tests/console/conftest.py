import pytest
from django.test import Client

from tests.console.seed import seed_history, seed_world, staff_user
from tests.effects.conftest import effect_settings, smtp_server  # noqa: F401  (real SMTP sink)


@pytest.fixture
def world(effect_settings):  # noqa: F811
    # The seeded report's email turns uncertain when the client's wait for the SMTP sink's
    # stalled answer times out: a shorter wait than the effects suite's, in every test here.
    effect_settings.EFFECT_TIMEOUT_SECONDS = 0.4
    return seed_world()


@pytest.fixture
def staff_client(db):
    client = Client()
    client.force_login(staff_user("staff-only"))
    return client


@pytest.fixture
def history(world):
    """billing-sync and its eight quarter hours (tests.console.seed.HISTORY), in the world's tenant."""
    return seed_history(world.tenant)
