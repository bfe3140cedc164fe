"""Timed pauses, labels, bulk pause and resume, and the audit (API v1.2), through the API."""

from datetime import timedelta

from django.test import Client

from kernel.clock import authority_now, instant
from runs.authority import resume as resume_module
from runs.loops import scan_pass
from runs.models import Run, RunState
from schedule_services import bulk
from schedules.models import AuditEntry, Schedule
from tests.api.conftest import create_schedule
from tests.console.seed import staff_user

EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "UTC"}


def _pause(client, schedule_id, body=None):
    return client.post(f"/api/v1/schedules/{schedule_id}/pause", body, format="json" if body is not None else None)


def _error_field(response):
    return response.json()["error"]["details"].get("field")


def _pause_began_minutes_ago(schedule_id, minutes: int) -> None:
    """Time passes while paused: the pause began `minutes` ago, and its end (if timed) is due."""
    now = authority_now().replace(second=0, microsecond=0)
    paused = Schedule.objects.get(id=schedule_id)
    Schedule.objects.filter(id=schedule_id).update(
        paused_at=now - timedelta(minutes=minutes, seconds=30), resume_from=now - timedelta(minutes=minutes),
        paused_until=(now - timedelta(seconds=1)) if paused.paused_until else None,
    )


# --- Timed pauses --------------------------------------------------------------------------


def test_timed_pause__shown__and_the_scan_resumes_it_with_its_misfire_policy(client):
    schedule = create_schedule(client, recurrence=EVERY_MINUTE, misfirePolicy="latest_only")
    sid = schedule["scheduleId"]
    until = instant(authority_now() + timedelta(hours=1))
    response = _pause(client, sid, {"until": until, "reason": "quarter-end freeze"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["paused"], body["pausedUntil"], body["pauseReason"]) == (True, until, "quarter-end freeze")
    assert body["nextRunAt"] is None
    assert client.get(f"/api/v1/schedules/{sid}").json()["pausedUntil"] == until

    scan_pass()  # not due yet: nothing changes
    assert Schedule.objects.get(id=sid).paused

    _pause_began_minutes_ago(sid, 3)
    scan_pass()
    body = client.get(f"/api/v1/schedules/{sid}").json()
    assert (body["paused"], body["pausedUntil"], body["pauseReason"]) == (False, None, None)
    assert body["nextRunAt"] is not None
    # latest_only, as a manual resume: the latest missed instant runs, the others are skipped.
    runs = list(Run.objects.filter(schedule_id=sid))
    assert len([r for r in runs if r.state != RunState.SKIPPED]) == 1
    assert len([r for r in runs if r.state == RunState.SKIPPED]) >= 2

    scan_pass()  # once only
    resumes = AuditEntry.objects.filter(schedule_id=sid, action="resume")
    assert [(e.actor_kind, e.actor, e.details) for e in resumes] == [("scheduler", "scheduler", {"timed": True})]


def test_timed_pause__a_manual_resume_first__the_timer_does_nothing(client):
    sid = create_schedule(client)["scheduleId"]
    _pause(client, sid, {"until": instant(authority_now() + timedelta(minutes=5))})
    assert client.post(f"/api/v1/schedules/{sid}/resume").status_code == 200
    assert Schedule.objects.get(id=sid).paused_until is None
    scan_pass()
    assert AuditEntry.objects.filter(schedule_id=sid, action="resume").count() == 1


def test_pause__hostile_values__400_naming_the_field(client):
    sid = create_schedule(client)["scheduleId"]
    past = instant(authority_now() - timedelta(seconds=1))
    for body, field in [
        ({"until": past}, "until"),
        ({"until": "9999-12-31T23:59:59Z"}, "until"),  # past the last instant shown on every clock
        ({"until": "tomorrow"}, "until"),
        ({"until": 1}, "until"),
        ({"reason": "x" * 501}, "reason"),
        ({"reason": "line\nbreak"}, "reason"),
        ({"reason": "bell\x07"}, "reason"),
        ({"reason": 5}, "reason"),
        ({"untill": past}, "untill"),
    ]:
        response = _pause(client, sid, body)
        assert response.status_code == 400, (body, response.content)
        assert _error_field(response) == field, body
    assert not Schedule.objects.get(id=sid).paused  # nothing refused was half-applied
    response = _pause(client, sid, {"until": "9999-12-30T00:00:00Z", "reason": "é" * 500})
    assert response.status_code == 200, response.content
    assert response.json()["pausedUntil"] == "9999-12-30T00:00:00Z"
    scan_pass()
    assert Schedule.objects.get(id=sid).paused


def test_pause__again__without_a_body_changes_nothing__with_one_replaces_the_end(client):
    sid = create_schedule(client)["scheduleId"]
    until = instant(authority_now() + timedelta(hours=1))
    _pause(client, sid, {"until": until, "reason": "a"})
    assert _pause(client, sid).json()["pausedUntil"] == until
    body = _pause(client, sid, {"until": None}).json()
    assert (body["paused"], body["pausedUntil"], body["pauseReason"]) == (True, None, "a")
    assert AuditEntry.objects.filter(schedule_id=sid, action="pause").count() == 2


# --- Labels --------------------------------------------------------------------------------


def test_labels__stored__filtered_by_every_label_given__replaced_by_an_edit(client, other_client):
    finance = create_schedule(client, labels={"team": "finance", "tier": "gold"})
    finance_silver = create_schedule(client, labels={"team": "finance", "tier": "silver"})
    create_schedule(client, labels={"team": "ops"})
    create_schedule(other_client, labels={"team": "finance"})  # another tenant's: never listed
    assert finance["labels"] == {"team": "finance", "tier": "gold"}

    def listed(*labels):
        response = client.get("/api/v1/schedules", {"label": list(labels)})
        assert response.status_code == 200, response.content
        return {s["scheduleId"] for s in response.json()["results"]}

    assert listed("team:finance") == {finance["scheduleId"], finance_silver["scheduleId"]}
    assert listed("team:finance", "tier:gold") == {finance["scheduleId"]}
    assert listed("team:nobody") == set()

    response = client.patch(f"/api/v1/schedules/{finance['scheduleId']}",
                            {"expectedRevision": 1, "labels": {"team": "ops", "url": "a:b/c"}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["labels"] == {"team": "ops", "url": "a:b/c"} and response.json()["revision"] == 2
    assert listed("team:finance") == {finance_silver["scheduleId"]}
    assert finance["scheduleId"] in listed("url:a:b/c")  # a value may hold the separator
    revisions = client.get(f"/api/v1/schedules/{finance['scheduleId']}/revisions").json()["results"]
    assert [r["labels"] for r in revisions] == [{"team": "ops", "url": "a:b/c"}, {"team": "finance", "tier": "gold"}]


def test_labels__hostile_values__400_naming_the_field(client):
    for labels, field in [
        ({f"k{n}": "v" for n in range(21)}, "labels"),
        ({"team": "fin\x00ance"}, "labels.team"),
        ({"team": "fin\u202eance"}, "labels.team"),
        ({"team": "a\nb"}, "labels.team"),
        ({"team": "x" * 201}, "labels.team"),
        ({"team": 5}, "labels.team"),
        ({"team": None}, "labels.team"),
        ({"a:b": "v"}, "labels"),
        ({"": "v"}, "labels"),
        ({"k" * 64: "v"}, "labels"),
        ({"tab\tkey": "v"}, "labels"),
        (["team", "finance"], "labels"),
    ]:
        response = client.post("/api/v1/schedules", {**create_body(), "labels": labels}, format="json")
        assert response.status_code == 400, (labels, response.content)
        assert _error_field(response) == field, (labels, response.json())
    assert not Schedule.objects.exists()
    assert create_schedule(client, labels={f"k{n}": "v" * 200 for n in range(20)})["labels"]["k19"] == "v" * 200
    for query in ["team", "a b:c", ":v", "team:\x07"]:
        response = client.get("/api/v1/schedules", {"label": query})
        assert response.status_code == 400 and _error_field(response) == "label", query
    response = client.get("/api/v1/schedules", {"label": ["team:a", "team:b"]})
    assert response.status_code == 400 and _error_field(response) == "label"


def create_body():
    from tests.api.conftest import CRON_BODY

    return dict(CRON_BODY)


# --- Bulk pause and resume -----------------------------------------------------------------


def test_bulk_pause__counts_what_it_paused__resume_ends_exactly_those_still_paused_by_it(client, other_client):
    a, b, c = (create_schedule(client, labels={"team": "finance"})["scheduleId"] for _ in range(3))
    ops = create_schedule(client, labels={"team": "ops"})["scheduleId"]
    theirs = create_schedule(other_client, labels={"team": "finance"})["scheduleId"]
    _pause(client, c, {"reason": "by hand"})

    response = client.post("/api/v1/schedules/pause", {"filter": {"labels": {"team": "finance"}}, "reason": "freeze"},
                           format="json")
    assert response.status_code == 200, response.content
    action_id = response.json()["actionId"]
    assert response.json()["paused"] == 2  # c was paused already
    detail = client.get(f"/api/v1/schedules/{a}").json()
    assert (detail["paused"], detail["pauseReason"], detail["pauseActionId"]) == (True, "freeze", action_id)
    assert client.get(f"/api/v1/schedules/{c}").json()["pauseReason"] == "by hand"
    assert not Schedule.objects.get(id=ops).paused and not Schedule.objects.get(id=theirs).paused

    client.post(f"/api/v1/schedules/{b}/resume")  # resumed by hand meanwhile, then paused again by hand
    _pause(client, b)
    assert Schedule.objects.get(id=b).pause_action_id is None

    assert other_client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json").status_code == 404
    assert Schedule.objects.get(id=a).paused
    response = client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"actionId": action_id, "resumed": 1}
    assert not Schedule.objects.get(id=a).paused
    assert Schedule.objects.get(id=b).paused and Schedule.objects.get(id=c).paused
    again = client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json")
    assert again.json()["resumed"] == 0
    entries = client.get("/api/v1/audit", {"scheduleId": a}).json()["results"]
    assert [(e["action"], e.get("actionId")) for e in entries[:2]] == [("resume", action_id), ("pause", action_id)]


def test_bulk_pause__in_batches__by_job_type__with_a_timed_end(client, monkeypatch):
    monkeypatch.setattr(bulk, "BULK_BATCH", 3)
    monkeypatch.setattr(resume_module, "RESUME_ACTION_BATCH", 3)
    monkeypatch.setattr(resume_module, "RESUME_INLINE", 3)  # the scan passes resume the rest
    ids = {create_schedule(client, labels={"n": str(n)})["scheduleId"] for n in range(8)}
    create_schedule(client, jobType="demo.export", params={"seconds": 0})
    until = instant(authority_now() + timedelta(hours=2))
    response = client.post("/api/v1/schedules/pause", {"filter": {"jobType": "demo.sleep"}, "until": until},
                           format="json")
    assert response.status_code == 200, response.content
    assert response.json()["paused"] == 8
    paused = Schedule.objects.filter(paused=True)
    assert set(paused.values_list("id", flat=True)) == ids
    assert {instant(s.paused_until) for s in paused} == {until}
    assert AuditEntry.objects.filter(action="pause", details__actionId=response.json()["actionId"]).count() == 8
    action_id = response.json()["actionId"]
    resumed = client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json")
    assert resumed.json()["resumed"] == 8
    assert Schedule.objects.filter(paused=True).count() == 5  # their pause has ended: the scan resumes them
    assert client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json").json()["resumed"] == 0
    scan_pass()
    assert not Schedule.objects.filter(paused=True).exists()
    entries = AuditEntry.objects.filter(action="resume")
    assert sorted(e.schedule_id for e in entries) == sorted(ids)
    assert {(e.actor_kind, e.actor, e.details["actionId"]) for e in entries} == {("api", "acme", action_id)}


def test_bulk__hostile_bodies__400_naming_the_field(client):
    create_schedule(client, labels={"team": "finance"})
    for body, field in [
        ({"filter": {}}, "filter"),
        ({"filter": {"labels": {}}}, "filter"),
        ({}, "filter"),
        ({"filter": None}, "filter"),
        ({"filter": {"labels": {"team": "a\x1b"}}}, "filter.labels.team"),
        ({"filter": {"labels": {"team": "finance"}}, "until": instant(authority_now() - timedelta(minutes=1))},
         "until"),
        ({"filter": {"labels": {"team": "finance"}}, "reason": "r" * 501}, "reason"),
        ({"filter": {"labels": {"team": "finance"}, "name": "x"}}, "filter.name"),
    ]:
        response = client.post("/api/v1/schedules/pause", body, format="json")
        assert response.status_code == 400, (body, response.content)
        assert _error_field(response) == field, (body, response.json())
    assert not Schedule.objects.filter(paused=True).exists()
    for body in [{}, {"actionId": 5}, {"actionId": "x" * 41}]:
        assert client.post("/api/v1/schedules/resume", body, format="json").status_code == 400, body
    assert client.post("/api/v1/schedules/resume", {"actionId": "act_nope"}, format="json").status_code == 404


# --- Audit ---------------------------------------------------------------------------------


def test_audit__who_did_what_when__newest_first__paged__tenant_scoped(client, other_client, tenant):
    sid = create_schedule(client)["scheduleId"]
    client.patch(f"/api/v1/schedules/{sid}", {"expectedRevision": 1, "name": "renamed"}, format="json")
    _pause(client, sid, {"reason": "why not"})
    client.post(f"/api/v1/schedules/{sid}/resume")
    assert client.delete(f"/api/v1/schedules/{sid}").status_code == 204
    other = create_schedule(client)["scheduleId"]

    response = client.get("/api/v1/audit", {"scheduleId": sid})
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [e["action"] for e in results] == ["delete", "resume", "pause", "update", "create"]
    assert {e["actor"] for e in results} == {tenant.name}  # the first token is named after the tenant
    assert {e["actorKind"] for e in results} == {"api"}
    assert (results[3]["revision"], results[4]["revision"], results[2]["reason"]) == (2, 1, "why not")
    assert all(e["scheduleId"] == sid for e in results)

    first = client.get("/api/v1/audit", {"limit": 2}).json()
    assert [e["action"] for e in first["results"]] == ["create", "delete"]  # newest first, both schedules
    assert first["results"][0]["scheduleId"] == other
    pages, cursor = [first["results"]], first["nextCursor"]
    while cursor:
        page = client.get("/api/v1/audit", {"limit": 2, "cursor": cursor}).json()
        pages.append(page["results"])
        cursor = page["nextCursor"]
    assert sum(len(p) for p in pages) == 6

    since = results[2]["at"]
    recent = client.get("/api/v1/audit", {"scheduleId": sid, "since": since}).json()["results"]
    assert [e["action"] for e in recent] == ["delete", "resume", "pause"]

    assert other_client.get("/api/v1/audit").json()["results"] == []
    assert other_client.get("/api/v1/audit", {"scheduleId": sid}).json()["results"] == []
    for params, field in [({"since": "yesterday"}, "since"), ({"cursor": "garbage"}, "cursor"),
                          ({"limit": 0}, "limit"), ({"actor": "x"}, "actor")]:
        response = client.get("/api/v1/audit", params)
        assert response.status_code == 400 and _error_field(response) == field, params
    assert other_client.get("/api/v1/audit", {"cursor": first["nextCursor"]}).status_code == 400


def test_audit__staff_actions_name_the_user__console_shows_labels_pause_and_audit(client, db):
    sid = create_schedule(client, labels={"team": "finance"})["scheduleId"]
    _pause(client, sid, {"until": instant(authority_now() + timedelta(days=1)), "reason": "audit week"})
    client.post(f"/api/v1/schedules/{sid}/resume")
    staff = Client()
    user = staff_user("ops-jane")
    user.is_superuser = True  # the admin's pages too
    user.save()
    staff.force_login(user)
    response = staff.post(f"/console/schedules/{sid}/pause/")
    assert response.status_code in (302, 303), response.content
    entry = AuditEntry.objects.filter(schedule_id=sid).latest("id")
    assert (entry.action, entry.actor_kind, entry.actor) == ("pause", "admin", "ops-jane")
    _pause(client, sid, {"until": instant(authority_now() + timedelta(days=1)), "reason": "audit week"})

    page = staff.get(f"/console/schedules/{sid}/").content.decode()
    assert 'id="labels"' in page and "team:finance" in page
    assert 'id="paused-until"' in page and "audit week" in page
    assert 'id="audit"' in page and "ops-jane" in page

    admin_page = staff.get(f"/admin/schedules/schedule/{sid}/change/")
    assert admin_page.status_code == 200
    text = admin_page.content.decode()
    assert "audit week" in text and "ops-jane" in text and "finance" in text
    assert staff.get("/admin/schedules/auditentry/").status_code == 200
    assert staff.get("/admin/schedules/bulkaction/").status_code == 200



def test_timed_pause__the_scans_look_up_reads_its_partial_index(tenant):
    """Every scan pass asks for the due timed pauses: one read of schedule_paused_until_idx,
    whatever the number of schedules."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.authority import resume_due_pauses
    from schedules.models import JobType

    job_type = JobType.objects.get(name="demo.sleep")
    Schedule.objects.bulk_create([
        Schedule(id=f"sch_bulk{n:06d}", tenant=tenant, job_type=job_type, name="s", recurrence=EVERY_MINUTE,
                 next_run_at=authority_now() + timedelta(minutes=1), bucket=n % 8)
        for n in range(2000)
    ])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE schedules_schedule")
    with CaptureQueriesContext(connection) as queries:
        assert resume_due_pauses() == 0
    look_up = [q["sql"] for q in queries.captured_queries if "paused_until" in q["sql"]]
    assert len(look_up) == 1
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN {look_up[0]}")
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {look_up[0]}")
        explained = "\n".join(str(row) for row in cursor.fetchall())
    assert "schedule_paused_until_idx" in explained, explained


def test_admin_edit__labels_through_the_service__audited_as_the_staff_user(admin_client, client):
    from tests.api.test_admin import change_form, change_url, form_errors

    sid = create_schedule(client, labels={"team": "finance"})["scheduleId"]
    page = admin_client.get(change_url(sid))
    assert '"team": "finance"' in change_form(page)["labels"]
    refused = admin_client.post(change_url(sid), {**change_form(page), "labels": '{"team": "a\\u0007b"}'})
    assert list(form_errors(refused)) == ["labels"]
    saved = admin_client.post(change_url(sid), {**change_form(page), "labels": '{"team": "ops"}'})
    assert saved.status_code == 302, form_errors(saved)
    assert client.get(f"/api/v1/schedules/{sid}").json()["labels"] == {"team": "ops"}
    assert {s["scheduleId"] for s in client.get("/api/v1/schedules", {"label": "team:ops"}).json()["results"]} == {sid}
    latest = client.get("/api/v1/audit", {"scheduleId": sid}).json()["results"][0]
    assert (latest["action"], latest["actorKind"], latest["actor"], latest["revision"]) == ("update", "admin", "admin", 2)


def test_bulk_pause_with_an_end__the_scan_ends_it_as_the_scheduler__another_tenant_cannot_touch_it(
        client, other_client):
    sid = create_schedule(client, recurrence=EVERY_MINUTE, labels={"team": "finance"})["scheduleId"]
    until = instant(authority_now() + timedelta(hours=1))
    response = client.post("/api/v1/schedules/pause", {"filter": {"labels": {"team": "finance"}}, "until": until},
                           format="json")
    action_id = response.json()["actionId"]
    assert other_client.post(f"/api/v1/schedules/{sid}/pause", {"until": None}, format="json").status_code == 404
    assert other_client.post(f"/api/v1/schedules/{sid}/resume").status_code == 404
    assert other_client.get("/api/v1/schedules", {"label": "team:finance"}).json()["results"] == []
    _pause_began_minutes_ago(sid, 2)
    scan_pass()
    assert not Schedule.objects.get(id=sid).paused
    entry = AuditEntry.objects.filter(schedule_id=sid).latest("id")
    assert (entry.action, entry.actor, entry.details) == ("resume", "scheduler", {"timed": True, "actionId": action_id})
    assert client.post("/api/v1/schedules/resume", {"actionId": action_id}, format="json").json()["resumed"] == 0
