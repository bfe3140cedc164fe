"""The served API docs work offline: every asset they load is one of our own static files."""

import re
from urllib.parse import urlsplit

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

ASSET_REFERENCE = re.compile(r'(?:src|href)="([^"]+)"')


@pytest.fixture
def static_client(settings):
    # Tests do not run collectstatic: WhiteNoise serves straight from the apps' static folders.
    settings.WHITENOISE_USE_FINDERS = True
    return Client()


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_docs__load_every_asset_from_our_own_static_url(static_client, settings, page):
    response = static_client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.findall(r"(?:https?:)?//[\w.-]+\.\w+", html), "the page names an outside host"
    assets = ASSET_REFERENCE.findall(html)
    assert any(asset.endswith(".js") for asset in assets), assets
    for asset in assets:
        parts = urlsplit(asset)
        assert not parts.scheme and not parts.netloc and parts.path.startswith(settings.STATIC_URL), asset
        served = static_client.get(asset)
        assert served.status_code == 200, asset
        served.close()
