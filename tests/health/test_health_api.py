"""GET /schedules/{id}/health and GET /incidents: tenant-scoped, paginated, as the contract names them."""

from datetime import timedelta

import pytest

from runs.health.evaluation import health_pass
from runs.models import Incident
from schedules.models import Schedule
from tests.api.conftest import assert_error, create_schedule
from tests.authority_steps import make_due

pytestmark = [pytest.mark.django_db]
EXPECT = {"startWithinSeconds": 60}


def late(client, name="s"):
    created = create_schedule(client, name=name, expectations=EXPECT)
    make_due(Schedule.objects.get(id=created["scheduleId"]), ago=timedelta(minutes=5))
    return created["scheduleId"]


def test_health__healthy_then_late_with_its_open_incident(client):
    schedule_id = late(client)
    body = client.get(f"/api/v1/schedules/{schedule_id}/health").json()
    assert body["state"] == "healthy" and body["openIncidents"] == [] and body["since"].endswith("Z")
    health_pass()
    body = client.get(f"/api/v1/schedules/{schedule_id}/health").json()
    incident = Incident.objects.get()
    assert body["state"] == "late"
    assert body["since"] == incident.opened_at.isoformat().replace("+00:00", "Z")
    (listed,) = body["openIncidents"]
    assert {key: listed[key] for key in ("incidentId", "scheduleId", "kind", "runId", "resolvedAt")} == {
        "incidentId": incident.id, "scheduleId": schedule_id, "kind": "late_start", "runId": None,
        "resolvedAt": None}


def test_health__failing_outranks_late(client):
    schedule_id = late(client)
    health_pass()
    schedule = Schedule.objects.get(id=schedule_id)
    Incident.objects.create(tenant_id=schedule.tenant_id, schedule=schedule, kind="failures", breach_key="x",
                            opened_at=Incident.objects.get().opened_at + timedelta(seconds=1))
    assert client.get(f"/api/v1/schedules/{schedule_id}/health").json()["state"] == "failing"


def test_health__another_tenants_schedule_is_404(client, other_client):
    schedule_id = late(client)
    assert_error(other_client.get(f"/api/v1/schedules/{schedule_id}/health"), 404, "not_found")
    assert_error(client.get("/api/v1/schedules/sch_nope/health"), 404, "not_found")


def test_incidents__tenant_scoped_filtered_and_paged(client, other_client):
    ids = [late(client, name=f"s{i}") for i in range(5)]
    late(other_client, name="theirs")
    health_pass()
    first = Incident.objects.get(schedule_id=ids[0])
    Incident.objects.filter(id=first.id).update(resolved_at=first.opened_at + timedelta(seconds=1),
                                                resolution="recovered")
    seen, cursor = [], None
    while True:
        response = client.get("/api/v1/incidents", {"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.content
        body = response.json()
        seen += body["results"]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert sorted(item["scheduleId"] for item in seen) == sorted(ids)
    assert set(seen[0]) >= {"incidentId", "scheduleId", "kind", "runId", "openedAt", "resolvedAt"}
    open_ = client.get("/api/v1/incidents", {"state": "open"}).json()["results"]
    assert len(open_) == 4 and first.id not in {item["incidentId"] for item in open_}
    resolved = client.get("/api/v1/incidents", {"state": "resolved"}).json()["results"]
    assert [item["incidentId"] for item in resolved] == [first.id] and resolved[0]["resolvedAt"]
    one = client.get("/api/v1/incidents", {"scheduleId": ids[1]}).json()["results"]
    assert [item["scheduleId"] for item in one] == [ids[1]]
    assert len(other_client.get("/api/v1/incidents").json()["results"]) == 1


@pytest.mark.parametrize("query,field", [({"state": "closed"}, "state"), ({"cursor": "garbage"}, "cursor"),
                                         ({"limit": 0}, "limit"), ({"surprise": 1}, "surprise")])
def test_incidents__bad_queries_are_400(client, query, field):
    assert_error(client.get("/api/v1/incidents", query), 400, "invalid_request", field=field)


def test_incidents__a_cursor_of_another_listing_is_refused(client):
    for i in range(3):
        late(client, name=f"s{i}")
    health_pass()
    cursor = client.get("/api/v1/incidents", {"limit": 1}).json()["nextCursor"]
    assert_error(client.get("/api/v1/incidents", {"state": "open", "cursor": cursor}), 400, "invalid_request",
                 field="cursor")


def test_incidents__worker_token_is_403(worker_client):
    assert_error(worker_client.get("/api/v1/incidents"), 403, "forbidden")
