"""New runs fill fresh pages together, not the space a history left free on its pages
(runs.0030: runs_run keeps a tenth of each page free on PostgreSQL).

The history here is written as a deployment's was before that migration: packed full, each
page with room for one more new run but not for a run and the reserve. The same new runs are
then made by the product (run once) with the reserve and, as the control, without it."""

import pytest
from django.db import connection

from runs.authority import run_once
from tests.authority_steps import create_schedule, insert_runs

pytestmark = pytest.mark.django_db(transaction=True)  # VACUUM runs outside any transaction

HISTORY, NEW = 3000, 60
RESERVE = 8192 // 10  # what fillfactor 90 keeps free on a page


def sql(statement: str, params=()) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def pages(where: str, params=()) -> set[int]:
    return {row[0] for row in sql(f"SELECT DISTINCT (ctid::text::point)[0]::int FROM runs_run WHERE {where}", params)}


def load_history(tenant, schedule) -> int:
    """A history of finished runs packed full as before the reserve, each row sized to leave
    its page ~1 KB free; the number of the history's last page."""
    sql("ALTER TABLE runs_run RESET (fillfactor)")
    try:
        insert_runs(HISTORY, tenant_id=tenant.id, schedule_ids=[schedule.id], state="failed",
                    due="now() - interval '30 days'", extra="h")
        sql("UPDATE runs_run SET error = repeat('x', 800) WHERE id LIKE 'run_h%%'")
        sql("VACUUM FULL runs_run")
    finally:
        sql("ALTER TABLE runs_run SET (fillfactor = 90)")
    sql("VACUUM runs_run")  # the free space map, as autovacuum leaves it
    return max(pages("id LIKE 'run_h%%'"))


def make_new_runs(tenant, schedule) -> set[int]:
    """``NEW`` runs made by the product; the pages they went to."""
    ids = [run_once(tenant=tenant, schedule_id=schedule.id)[0].id for _ in range(NEW)]
    return pages("id = ANY(%s)", [ids])


@pytest.fixture
def history(tenant):
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is PostgreSQL's")
    sql("CREATE EXTENSION IF NOT EXISTS pg_freespacemap")
    schedule = create_schedule(tenant)
    last_page = load_history(tenant, schedule)
    free = [row[0] for row in sql("SELECT avail FROM pg_freespace('runs_run') WHERE blkno < %s", [last_page])]
    return schedule, last_page, min(free), max(free)


def test_fillfactor__runs_run_keeps_a_tenth_of_each_page_free():
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is PostgreSQL's")
    assert sql("SELECT reloptions FROM pg_class WHERE relname = 'runs_run'") == [(["fillfactor=90"],)]


def test_new_runs__fill_fresh_pages__not_the_room_left_on_a_historys_pages(tenant, history):
    schedule, last_page, least, most = history
    created = make_new_runs(tenant, schedule)
    (row,) = sql("SELECT max(pg_column_size(r.*)) FROM runs_run r WHERE id NOT LIKE 'run_h%%'")[0]
    # The case: every history page has room for a new run, none for one and the reserve.
    assert row < least and most < row + RESERVE, (row, least, most)
    assert min(created) >= last_page, sorted(created)  # the history's last page first: it was left half empty
    assert len(created) <= NEW * row // (8192 - RESERVE) + 2, sorted(created)  # together, a page filled after another


def test_new_runs__without_the_reserve__scatter_over_the_historys_pages(tenant, history):
    schedule, last_page, _, _ = history
    sql("ALTER TABLE runs_run RESET (fillfactor)")
    try:
        created = make_new_runs(tenant, schedule)
    finally:
        sql("ALTER TABLE runs_run SET (fillfactor = 90)")
    assert max(created) <= last_page and len(created) == NEW, sorted(created)  # one to a page, all cold
