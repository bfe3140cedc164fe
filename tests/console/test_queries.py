"""What the console's figures read on a long history: the runs list filtered on a rare state
reads run_finished_state_idx (not the tenant's whole history), the overview's expired leases
of the last hour read attempt_expired_at_idx (not every attempt)."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from kernel.clock import authority_now
from runs.models import Attempt, AttemptState, Run, RunState
from tests.authority_steps import create_schedule
from tests.runs.test_due_scan import table_reads

pytestmark = pytest.mark.django_db

HISTORY = 3000
ROWS_READ = "coalesce(idx_tup_fetch, 0) + seq_tup_read"


@pytest.fixture
def long_history(tenant):
    """HISTORY canceled runs, each with an attempt; the 3 oldest runs failed, and 3 of the
    attempts expired: one 2 hours ago, two in the last hour."""
    schedule = create_schedule(tenant)
    now = authority_now()
    first = now - timedelta(days=30)
    runs = Run.objects.bulk_create(
        Run(schedule=schedule, tenant=tenant, revision=1, job_type="demo.sleep", resource_class="short",
            state=RunState.FAILED if i < 3 else RunState.CANCELED, scheduled_at=first + timedelta(minutes=i),
            due_at=first, created_at=first, finished_at=first + timedelta(minutes=i))
        for i in range(HISTORY)
    )
    expired_at = {HISTORY - 1: now - timedelta(minutes=5), HISTORY - 2: now - timedelta(minutes=50),
                  HISTORY - 3: now - timedelta(hours=2)}
    Attempt.objects.bulk_create(
        Attempt(run=run, number=1, fence=1, lease_seconds=60, started_at=run.scheduled_at,
                lease_expires_at=run.scheduled_at, finished_at=expired_at.get(i, run.finished_at),
                expired_at=expired_at.get(i), state=AttemptState.EXPIRED if i in expired_at else AttemptState.CANCELED)
        for i, run in enumerate(runs)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_attempt")
    return runs


def scans_of(sql: str, table: str) -> list[tuple[str, str | None]]:
    """(node type, index) of every scan of `table` in the plan of `sql`."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    found, nodes = [], [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", ()))
        if node.get("Relation Name") == table:
            found.append((node["Node Type"], node.get("Index Name")))
    return found


def captured(queries, table: str, pattern: str) -> str:
    """The first of ``queries`` reading ``table`` (named as the ORM quotes it, or as a written
    statement does) whose text matches ``pattern``."""
    return next(q["sql"] for q in queries
                if re.search(rf'FROM "?{table}"?[ ,]', q["sql"] + " ") and re.search(pattern, q["sql"]))


def test_runs_list__a_rare_state__reads_the_tenant_state_index(long_history, staff_client):
    before = table_reads("runs_run", ROWS_READ)
    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get("/console/runs/", {"state": RunState.FAILED}).content.decode()
    assert table_reads("runs_run", ROWS_READ) - before < 50  # the 3 failed runs, not 3,000
    assert [run.id for run in reversed(long_history[:3])] == re.findall(r'href="/console/runs/(run_\w+)/"', page)
    assert scans_of(captured(queries, "runs_run", r'ORDER BY .*scheduled_at"? DESC'), "runs_run") == [
        ("Index Scan", "run_finished_state_idx")]


def test_overview__expired_leases_of_the_last_hour_from_the_attempts_index(long_history, staff_client):
    before = table_reads("runs_attempt", ROWS_READ)
    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get("/console/").content.decode()
    assert re.search(r'id="expired-leases-hour">.*?class="figure">2<', page, re.S)
    assert "stale-fence rejections (since process start)" in page
    assert table_reads("runs_attempt", ROWS_READ) - before < 50
    scans = scans_of(captured(queries, "runs_attempt", r"expired"), "runs_attempt")
    assert len(scans) == 1 and scans[0][1] == "attempt_expired_at_idx"


def grow(tenant, schedules: int, *, offset: int, also=()) -> list[str]:
    """`schedules` more schedules (New York and UTC), and over them and `also`: 10 failed runs
    each, two hours ago, each failed run with an uncertain email, and one queued run each, an
    hour late."""
    from runs.models import EffectIntent, EffectState
    from tests.authority_steps import insert_runs

    ids = list(also) + [create_schedule(tenant, cron="*/5 * * * *", name=f"grown-{offset}-{i}",
                                        zone="America/New_York" if i % 2 else "UTC").id for i in range(schedules)]
    def hours_ago(hours: int) -> str:
        return f"now() - interval '{hours} hours'" if connection.vendor == "postgresql" else f"'now', '-{hours} hours'"

    insert_runs(10 * len(ids), tenant_id=tenant.id, schedule_ids=ids, state="failed", due=hours_ago(2),
                extra=f"f{offset}x", offset=offset)
    insert_runs(len(ids), tenant_id=tenant.id, schedule_ids=ids, state="queued", due=hours_ago(1),
                extra=f"q{offset}x", offset=offset)
    now = authority_now()
    EffectIntent.objects.bulk_create(
        EffectIntent(action=f"send-{run_id}", run_id=run_id, kind="email", result_key="k", result_checksum="c",
                     state=EffectState.UNCERTAIN, created_at=now, updated_at=now)
        for run_id in Run.objects.filter(tenant=tenant, state="failed", id__startswith=f"run_f{offset}x")
        .values_list("id", flat=True))
    return ids


def test_pages__their_queries_do_not_grow_with_the_rows_they_show(tenant, staff_client):
    """Every page reads a fixed number of statements: no query per row (per run, per
    schedule, per effect, per failing schedule) on any page."""
    first = grow(tenant, 2, offset=0)
    run = Run.objects.filter(schedule_id=first[0]).order_by("-scheduled_at").first()
    pages = ["/console/", "/console/next-24-hours/", "/console/schedules/", f"/console/schedules/{first[0]}/",
             f"/console/runs/?tenant={tenant.id}", f"/console/runs/?tenant={tenant.id}&state=failed",
             f"/console/runs/{run.id}/", "/console/effects/", "/console/health/"]

    def statements() -> dict[str, int]:
        counted = {}
        for url in pages:
            with CaptureQueriesContext(connection) as queries:
                page = staff_client.get(url)
            assert page.status_code == 200, url
            counted[url] = len(queries)
        return counted

    few = statements()
    grow(tenant, 30, offset=1000, also=first)
    many = statements()
    assert many == few
    page = staff_client.get("/console/").content.decode()
    assert re.search(r'<li id="late-summary"><b>34</b> runs waiting', page)  # 2 + 30 + the first 2 again
    assert re.search(r'<li id="failing-summary"><b>32</b> schedules failing', page)
    assert page.count('<tr data-schedule="') == 10 and page.count('<tr data-run="') == 10  # the first ten of each
