"""The console's Replay button on a failed run's page: staff only, a POST with its CSRF
token, the note checked as the API checks it, recorded with the staff user's name."""

import pytest
from django.test import Client

from runs import authority
from runs.models import Run, RunState
from tests.authority_steps import create_schedule, start_run
from tests.console.seed import staff_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed(tenant) -> Run:
    run = start_run(create_schedule(tenant))
    return authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                              error="upstream down", retryable=False)


def test_run_page__replay_button_on_a_failed_run_queues_it_with_the_staff_user_s_note(failed, staff_client):
    page = staff_client.get(f"/console/runs/{failed.id}/").content.decode()
    assert 'id="replay"' in page and 'name="csrfmiddlewaretoken"' in page

    refused = staff_client.post(f"/console/runs/{failed.id}/replay/", {"note": "two\nlines"}, follow=True)
    assert "note" in refused.content.decode() and Run.objects.get(id=failed.id).state == RunState.FAILED

    staff_client.post(f"/console/runs/{failed.id}/replay/", {"note": "upstream fixed"})
    run = Run.objects.get(id=failed.id)
    assert run.state == RunState.QUEUED
    assert [(r["actor"], r["note"]) for r in run.replays] == [("staff-only", "upstream fixed")]
    page = staff_client.get(f"/console/runs/{failed.id}/").content.decode()
    assert 'id="replay"' not in page and 'id="replays"' in page and "upstream fixed" in page


def test_replay__needs_staff_a_post_and_a_csrf_token(failed, staff_client):
    assert staff_client.get(f"/console/runs/{failed.id}/replay/").status_code == 405
    assert Client().post(f"/console/runs/{failed.id}/replay/", {"note": "x"}).status_code == 302  # to the login
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(staff_user("staff-too"))
    assert guarded.post(f"/console/runs/{failed.id}/replay/", {"note": "x"}).status_code == 403
    assert Run.objects.get(id=failed.id).state == RunState.FAILED
