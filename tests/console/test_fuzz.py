"""Hostile query strings and form values never make a console page answer 5xx."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.console.seed import staff_user

pytestmark = pytest.mark.django_db

PAGES = {
    "/console/": (),
    "/console/next-24-hours/": (),
    "/console/schedules/": ("q", "tenant", "paused", "after"),
    "/console/runs/": ("tenant", "state", "before"),
    "/console/effects/": ("after",),
}
HOSTILE = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["\x00", "'; DROP TABLE runs_run; --", "%", "2026-13-45T99:99:99Z~x", "2026-01-01T00:00:00~",
                     "2026-01-01T00:00:00Z~run_x", "9" * 400, "yes", "running", "../../etc/passwd", "<script>"]),
)


@pytest.fixture
def staff(client):
    client.force_login(staff_user("fuzzer"))
    return client


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(page=st.sampled_from(sorted(PAGES)), values=st.dictionaries(st.sampled_from(
    ["q", "tenant", "paused", "after", "state", "before", "junk"]), HOSTILE, max_size=4))
def test_console_lists__hostile_filters_are_4xx_at_worst(staff, page, values):
    response = staff.get(page, values)
    assert response.status_code in (200, 400), (page, values, response.status_code)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(path=st.one_of(st.sampled_from(["\x00", "run_\x00", "x" * 500, "%00", "..", "sch_01 OR 1=1"]), st.text(
           st.characters(blacklist_categories=["Cs"], blacklist_characters="/?#"), min_size=1, max_size=80)),
       kind=st.sampled_from(["schedules/{}/", "runs/{}/", "runs/{}/result/", "schedules/{}/pause/",
                             "effects/{}/resolve/", "runs/{}/cancel/"]),
       resolution=HOSTILE)
def test_console_ids__unknown_or_hostile_ids_are_4xx(staff, path, kind, resolution):
    url = "/console/" + kind.format(path)
    response = staff.post(url, {"resolution": resolution}) if kind.endswith(("pause/", "resolve/", "cancel/")) \
        else staff.get(url)
    assert response.status_code < 500, (url, response.status_code)


@pytest.mark.parametrize("url", ["/console/schedules/sch\x00x/", "/console/runs/run\x00x/", "/console/runs/%00/result/"])
def test_console_ids__a_nul_byte_is_404_not_500(staff, url):
    assert staff.get(url).status_code == 404
