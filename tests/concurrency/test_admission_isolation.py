"""While a strict admission computes its forecast, no other tenant's write waits for it: the
forecast is computed outside any transaction (on the embedded SQLite a transaction holds the
only write lock; on PostgreSQL strict admissions used to take turns for the whole
computation). Real sessions, each with its own connection: tenant A's strict create is held
in the middle of its computation while tenant B creates schedules (ordinary and strict) and
asks for a manual run; each answers at once. Released, A's admission finds B's strict
promise admitted meanwhile, computes again, and is admitted."""

import threading
import time

import pytest
from django.db.models import F

from runs.capacity import admission
from runs.capacity.live import slots_report
from runs.models import AdmissionEpoch
from schedules.models import Schedule
from tests.api.conftest import CRON_BODY
from tests.concurrency.harness import CALL_TIMEOUT
from tests.factories import api_client, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

WAITS_AT_MOST = 1.0  # seconds another tenant's write may take while the admission computes


@pytest.fixture
def held_admission(monkeypatch):
    """The first admission to read the live slots stops there until released; later ones pass."""
    computing, release = threading.Event(), threading.Event()
    read = admission.live_slots

    def live_slots(*args, **kwargs):
        if not computing.is_set():
            computing.set()
            release.wait(CALL_TIMEOUT / 2)
        return read(*args, **kwargs)

    monkeypatch.setattr(admission, "live_slots", live_slots)
    yield computing, release
    release.set()


def test_another_tenants_writes__do_not_wait_for_a_strict_admission(sessions, held_admission):
    computing, release = held_admission
    slots_report("worker:test:1", {"short": 10}, ttl_seconds=3600)
    a, b = make_tenant("a"), make_tenant("b")
    b_schedule = api_client(b).post("/api/v1/schedules", {**CRON_BODY, "name": "b-first"}).json()["scheduleId"]
    strict = {**CRON_BODY, "name": "strict", "recurrence": {"kind": "cron", "cron": "0 9 * * *"},
              "startDeadlineSeconds": 60}

    held = sessions("tenant-a").submit(lambda: api_client(a).post("/api/v1/schedules", strict))
    while not computing.wait(0.05):
        assert not held.done(), held.result().content  # answered without computing: nothing was held

    writer = sessions("tenant-b")
    writes = {
        "ordinary create": lambda: api_client(b).post("/api/v1/schedules", {**CRON_BODY, "name": "b-ordinary"}),
        "manual run": lambda: api_client(b).post(f"/api/v1/schedules/{b_schedule}/runs", {}),
        "strict create": lambda: api_client(b).post("/api/v1/schedules", {**strict, "name": "b-strict"}),
    }
    for name, write in writes.items():
        began = time.monotonic()
        response = writer.call(write)
        took = time.monotonic() - began
        assert took < WAITS_AT_MOST, f"B's {name} waited {took:.1f} s for A's admission"
        assert response.status_code == 201, (name, response.content)
    assert not held.done()  # A's admission was still computing all along

    release.set()
    response = held.result(CALL_TIMEOUT)
    assert response.status_code == 201, response.content
    assert Schedule.objects.filter(start_deadline_seconds__isnull=False).count() == 2
    assert AdmissionEpoch.objects.get(resource_class="short").epoch == 2  # each strict promise counted once


def test_another_tenants_write__does_not_wait_for_a_strict_admission_in_the_admin(sessions, held_admission):
    """The Django admin's schedule form applies the same admission: its save computes it
    outside any transaction too (the admin's own per-request transaction included)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from tests.api.test_admin import ADD_URL, add_form, change_form

    computing, release = held_admission
    slots_report("worker:test:1", {"short": 10}, ttl_seconds=3600)
    a, b = make_tenant("a"), make_tenant("b")
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    shown = admin.post(ADD_URL, add_form(a, cron="0 9 * * *", timezone="UTC", start_deadline_seconds="60"))

    held = sessions("admin").submit(lambda: admin.post(ADD_URL, change_form(shown)))
    while not computing.wait(0.05):
        assert not held.done(), held.result().status_code  # saved without computing: nothing was held

    began = time.monotonic()
    response = sessions("tenant-b").call(lambda: api_client(b).post("/api/v1/schedules", {**CRON_BODY, "name": "b"}))
    took = time.monotonic() - began
    assert took < WAITS_AT_MOST, f"B's create waited {took:.1f} s for the admin's admission"
    assert response.status_code == 201, response.content
    assert not held.done()

    release.set()
    assert held.result(CALL_TIMEOUT).status_code == 302
    assert Schedule.objects.filter(tenant=a, start_deadline_seconds=60).count() == 1


def test_an_admission_outpaced_every_time__answers_503_and_creates_nothing(sessions, monkeypatch):
    """Another process confirms a strict promise of the class while each of this admission's
    forecasts computes (moving the class's AdmissionEpoch from its own connection): after
    ADMISSION_ATTEMPTS forecasts the create answers 503 `unavailable` with Retry-After,
    nothing is created and the idempotency key is not spent. The same request sent again,
    once the other process is done, is admitted."""
    from schedule_services.lifecycle import ADMISSION_ATTEMPTS

    slots_report("worker:test:1", {"short": 10}, ttl_seconds=3600)
    AdmissionEpoch.objects.create(resource_class="short")
    a = make_tenant("a")
    other = sessions("another admission")
    forecasts = []
    read = admission.live_slots

    def outpaced(*args, **kwargs):
        forecasts.append(1)
        other.call(lambda: AdmissionEpoch.objects.filter(resource_class="short").update(epoch=F("epoch") + 1))
        return read(*args, **kwargs)

    monkeypatch.setattr(admission, "live_slots", outpaced)
    strict = {**CRON_BODY, "name": "strict", "recurrence": {"kind": "cron", "cron": "0 9 * * *"},
              "startDeadlineSeconds": 60}
    key = {"HTTP_IDEMPOTENCY_KEY": "strict-once"}
    response = api_client(a).post("/api/v1/schedules", strict, **key)
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "unavailable" and response["Retry-After"]
    assert len(forecasts) == ADMISSION_ATTEMPTS
    assert not Schedule.objects.filter(tenant=a).exists()

    monkeypatch.setattr(admission, "live_slots", read)
    response = api_client(a).post("/api/v1/schedules", strict, **key)
    assert response.status_code == 201, response.content
    assert Schedule.objects.filter(tenant=a).count() == 1
