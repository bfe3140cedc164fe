"""Failed logins to /admin/ and /console/ are throttled per user name and per address
(django-axes, counted in the database): past the limit the right password is refused too,
until the cool-off has passed. API tokens are not part of it."""

import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from http.cookiejar import CookieJar

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.console.seed import staff_user
from tests.factories import api_client, make_tenant

LOGIN_PAGES = {"console": ("/console/login/", "/console/"), "admin": ("/admin/login/", "/admin/")}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    """One visitor of a real server: cookies kept, redirects answered, not followed."""

    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect()
        )

    def request(self, path: str, form: dict | None = None) -> tuple[int, dict, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with self.opener.open(self.base + path, data=data, timeout=10) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as answer:
            return answer.code, dict(answer.headers), answer.read().decode()

    def log_in(self, page: str, username: str, password: str) -> tuple[int, dict, str]:
        login, home = LOGIN_PAGES[page]
        _, _, form = self.request(f"{login}?next={home}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        return self.request(f"{login}?next={home}", {
            "csrfmiddlewaretoken": token, "username": username, "password": password, "next": home,
        })

    def logged_in(self, page: str) -> bool:
        return self.request(LOGIN_PAGES[page][1])[0] == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_login__forty_wrong_passwords_then_the_right_one__refused_with_how_long_to_wait(live_server, page):
    get_user_model().objects.create_superuser("ops", "ops@example.com", "the-right-pw")
    browser = Browser(live_server.url)
    answers = [browser.log_in(page, "ops", f"guess-{n}")[0] for n in range(40)]
    limit = settings.AXES_FAILURE_LIMIT
    assert answers[:limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert set(answers[limit - 1:]) == {429}

    status, headers, body = browser.log_in(page, "ops", "the-right-pw")
    assert status == 429 and not browser.logged_in(page)
    cool_off = settings.AXES_COOLOFF_TIME
    assert headers["Retry-After"] == str(int(cool_off.total_seconds()))
    assert "Too many failed logins" in body and f"{int(cool_off.total_seconds() // 60)} minutes" in body
    assert f'href="{LOGIN_PAGES[page][0]}"' in body


def post_login(address: str, username: str, password: str, **meta):
    client = Client(REMOTE_ADDR=address, **meta)
    response = client.post("/console/login/", {"username": username, "password": password, "next": "/console/"})
    return response.status_code, client


def fail(address: str, username: str, times: int, **meta):
    for _ in range(times):
        assert post_login(address, username, "wrong", **meta)[0] in (200, 429)  # the form again, or the lockout


@pytest.mark.django_db
def test_login__an_address_past_the_limit_is_refused_for_every_user_name():
    staff_user("ops", "ops-pw")
    for n in range(settings.AXES_FAILURE_LIMIT):
        fail("203.0.113.7", f"someone-{n}", 1)
    assert post_login("203.0.113.7", "ops", "ops-pw")[0] == 429
    assert post_login("198.51.100.2", "ops", "ops-pw")[0] == 302  # another address: in


@pytest.mark.django_db
def test_login__behind_a_proxy_each_client_is_counted_by_the_address_the_proxy_appended(settings):
    # TRUST_X_FORWARDED_FOR=1 (tests/deploy/test_production_settings.py reads it from the environment)
    settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    settings.AXES_IPWARE_PROXY_ORDER = "right-most"
    staff_user("ops", "ops-pw")
    proxy = "10.0.0.2"
    for n in range(settings.AXES_FAILURE_LIMIT):  # a new made-up address each time, then the proxy's entry
        fail(proxy, f"someone-{n}", 1, HTTP_X_FORWARDED_FOR=f"198.51.100.{n + 1}, 203.0.113.7")
    assert post_login(proxy, "ops", "ops-pw", HTTP_X_FORWARDED_FOR="203.0.113.7")[0] == 429
    assert post_login(proxy, "ops", "ops-pw", HTTP_X_FORWARDED_FOR="192.0.2.44")[0] == 302  # another client


@pytest.mark.django_db
def test_login__a_user_name_past_the_limit_is_refused_from_every_address():
    staff_user("ops", "ops-pw")
    staff_user("other", "other-pw")
    for n in range(settings.AXES_FAILURE_LIMIT):
        fail(f"203.0.113.{n + 1}", "ops", 1)
    assert post_login("198.51.100.2", "ops", "ops-pw")[0] == 429
    assert post_login("203.0.113.1", "other", "other-pw")[0] == 302  # the addresses themselves are not locked


@pytest.mark.django_db
def test_login__after_the_cool_off_the_right_password_works_and_clears_the_count():
    staff_user("ops", "ops-pw")
    fail("203.0.113.7", "ops", settings.AXES_FAILURE_LIMIT)
    assert post_login("203.0.113.7", "ops", "ops-pw")[0] == 429
    for attempt in AccessAttempt.objects.all():  # the cool-off passes
        attempt.attempt_time -= settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
        attempt.save(update_fields=["attempt_time"])
    status, client = post_login("203.0.113.7", "ops", "ops-pw")
    assert status == 302 and client.get("/console/").status_code == 200
    assert not AccessAttempt.objects.exists()  # a success starts the count afresh
    fail("203.0.113.7", "ops", settings.AXES_FAILURE_LIMIT - 1)
    assert post_login("203.0.113.7", "ops", "ops-pw")[0] == 302


@pytest.mark.django_db
def test_login__lockout_leaves_api_tokens_alone():
    tenant = make_tenant("acme")
    fail("127.0.0.1", "ops", settings.AXES_FAILURE_LIMIT)
    assert post_login("127.0.0.1", "ops", "anything")[0] == 429
    assert api_client(tenant).get("/api/v1/schedules", REMOTE_ADDR="127.0.0.1").status_code == 200
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):  # wrong tokens are the API's 401, not login failures
        assert api_client("not-a-token").get("/api/v1/schedules", REMOTE_ADDR="192.0.2.9").status_code == 401
    assert not AccessAttempt.objects.filter(ip_address="192.0.2.9").exists()
