"""The job registry without a database: outputs, determinism, failure modes and checkpoints."""

import csv
import hashlib
import io
import json
import re
import threading
import time
import zipfile
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from workers.jobs.builtin import SalesOrder, sales_summary_html
from workers.jobs.framework import (
    JOBS,
    JobCanceled,
    JobContext,
    JobControl,
    JobLost,
    JobTimedOut,
    PermanentJobError,
    TransientJobError,
    get_job,
)

# 02:30 UTC on Wednesday is still Tuesday evening in New York.
SCHEDULED = datetime(2026, 9, 23, 2, 30, tzinfo=timezone.utc)


def make_ctx(params=None, *, tz="America/New_York", run_id="run_test1", timeout=None, scheduled_at=SCHEDULED):
    control = JobControl(timeout_seconds=timeout)
    control.start()  # as the runtime does when the job starts
    return JobContext(run_id=run_id, attempt_id="att_1", fence=1, scheduled_at=scheduled_at, timezone=tz,
                      params=dict(params or {}), control=control)


def run_job(name, params=None, **kw):
    return get_job(name)(make_ctx(params, **kw))


def open_report(output):
    archive = zipfile.ZipFile(io.BytesIO(output.data))
    assert archive.testzip() is None
    return archive


def html_number(document: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]+)<', document).group(1)


def test_registry__implements_every_builtin_job_type():
    assert {"report.sales", "demo.sleep", "demo.export"} <= set(JOBS)
    with pytest.raises(PermanentJobError):
        get_job("no.such.job")


def test_report_sales__zip_holds_csv_and_summary_whose_totals_agree():
    output = run_job("report.sales", {"region": "eu", "date": "2026-09-22"})

    assert output.content_type == "application/zip"
    assert output.filename == "sales-eu-2026-09-22.zip"
    archive = open_report(output)
    assert sorted(archive.namelist()) == ["sales-eu-2026-09-22.csv", "summary.html"]
    rows = list(csv.DictReader(io.StringIO(archive.read("sales-eu-2026-09-22.csv").decode())))
    assert 45 <= len(rows) <= 55
    for row in rows:
        assert Decimal(row["unit_price"]) * int(row["quantity"]) == Decimal(row["amount"])
        assert row["currency"] == "EUR" and row["order_date"] == "2026-09-22"
    assert len({row["order_id"] for row in rows}) == len(rows)

    summary = archive.read("summary.html").decode()
    assert int(html_number(summary, "total-orders")) == len(rows)
    assert int(html_number(summary, "total-units")) == sum(int(r["quantity"]) for r in rows)
    assert Decimal(html_number(summary, "total-revenue")) == sum(Decimal(r["amount"]) for r in rows)
    by_product = {}
    for row in rows:
        by_product[row["sku"]] = by_product.get(row["sku"], Decimal(0)) + Decimal(row["amount"])
    top = re.findall(r'<tr class="top-product"><td>([^<]+)</td>.*?class="revenue">([^<]+)<', summary)
    assert len(top) == 5
    assert [(sku, Decimal(rev)) for sku, rev in top] == sorted(by_product.items(), key=lambda kv: (-kv[1], kv[0]))[:5]


def test_report_sales__summary_escapes_product_names():
    orders = [SalesOrder("SO-1", "09:00", "C1", "SKU-X", '<script>alert("x")</script> & Co', 2,
                         Decimal("5.00"), Decimal("10.00"))]
    summary = sales_summary_html(orders, "us", date(2026, 9, 22), "USD").decode()

    assert "<script>" not in summary
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co" in summary


def test_report_sales__byte_identical_for_same_params_and_distinct_per_region():
    first = run_job("report.sales", {"region": "apac", "date": "2026-09-22"})
    again = run_job("report.sales", {"region": "apac", "date": "2026-09-22"}, run_id="run_other")
    other_region = run_job("report.sales", {"region": "latam", "date": "2026-09-22"})
    other_day = run_job("report.sales", {"region": "apac", "date": "2026-09-21"})

    assert first.data == again.data
    digests = {hashlib.sha256(o.data).hexdigest() for o in (first, other_region, other_day)}
    assert len(digests) == 3


def test_report_sales__defaults_to_us_and_scheduled_date_in_schedule_timezone():
    new_york = open_report(run_job("report.sales"))
    utc = open_report(run_job("report.sales", tz="UTC"))

    assert "sales-us-2026-09-22.csv" in new_york.namelist()
    assert "sales-us-2026-09-23.csv" in utc.namelist()


@pytest.mark.parametrize("params", [{"region": "mars"}, {"date": "22/09/2026"}, {"date": "2026-02-30"},
                                    {"date": "20260922"}])
def test_report_sales__invalid_query_is_permanent(params):
    with pytest.raises(PermanentJobError):
        run_job("report.sales", params)


def test_report_sales__checkpoints_between_stages():
    ctx = make_ctx({"region": "us"})
    ctx.control.request_cancel()
    with pytest.raises(JobCanceled):
        get_job("report.sales")(ctx)


def test_demo_sleep__returns_json_describing_the_run_deterministically():
    output = run_job("demo.sleep", {"seconds": 0.05})
    again = run_job("demo.sleep", {"seconds": 0.05})

    assert output.content_type == "application/json"
    assert json.loads(output.data) == {"jobType": "demo.sleep", "runId": "run_test1",
                                       "scheduledAt": "2026-09-23T02:30:00Z", "seconds": 0.05}
    assert output.data == again.data
    assert run_job("demo.sleep", run_id="run_test2").data != run_job("demo.sleep").data


def test_demo_sleep__fails_on_demand():
    with pytest.raises(TransientJobError):
        run_job("demo.sleep", {"fail": "transient"})
    with pytest.raises(PermanentJobError):
        run_job("demo.sleep", {"fail": "permanent"})
    with pytest.raises(PermanentJobError):
        run_job("demo.sleep", {"fail": "sometimes"})
    with pytest.raises(PermanentJobError):
        run_job("demo.sleep", {"seconds": -1})


def test_demo_sleep__cancellation_interrupts_the_sleep_promptly():
    ctx = make_ctx({"seconds": 30})
    threading.Timer(0.2, ctx.control.request_cancel).start()
    started = time.monotonic()

    with pytest.raises(JobCanceled):
        get_job("demo.sleep")(ctx)
    assert time.monotonic() - started < 1


def test_demo_sleep__lost_ownership_wins_over_cancellation():
    ctx = make_ctx({"seconds": 30})
    ctx.control.request_cancel()
    ctx.control.mark_lost("heartbeat refused")

    with pytest.raises(JobLost):
        get_job("demo.sleep")(ctx)


def test_demo_sleep__timeout_stops_the_job():
    started = time.monotonic()
    with pytest.raises(JobTimedOut):
        run_job("demo.sleep", {"seconds": 30}, timeout=0.3)
    assert 0.25 < time.monotonic() - started < 1


def test_interruptions__are_not_swallowed_by_except_exception():
    ctx = make_ctx()
    ctx.control.request_cancel()
    with pytest.raises(JobCanceled):
        try:
            ctx.checkpoint()
        except Exception:  # what a careless job might write
            pytest.fail("a checkpoint interruption must not be an Exception")


def test_demo_export__deterministic_csv_over_one_mebibyte():
    output = run_job("demo.export", {"seconds": 0})
    again = run_job("demo.export", {"seconds": 0})

    assert output.content_type == "text/csv"
    assert len(output.data) > 1024 * 1024
    assert output.data == again.data
    rows = list(csv.reader(io.StringIO(output.data.decode())))
    assert rows[0] == ["row", "key", "amount_cents"] and len(rows) == 20_001
    assert run_job("demo.export", run_id="run_other").data != output.data
