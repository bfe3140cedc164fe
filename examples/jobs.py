"""examples.orders_csv: a CSV export streamed through ``ctx.output()``, row by row.

However many rows it writes, the export never sits in the worker's memory: the rows go to
a spool file and the object store receives it in chunks. It shows the rest of the job
context too: params, the scheduled instant in the schedule's zone, the tenant, the
attempt, ``checkpoint()``, the run's logger and ``progress()``.

The rows are synthetic but deterministic: the same params and scheduled instant give the
same bytes on every attempt and host, as every job must (a retried upload has to match).

examples.daily_totals: the fence in the job's hands. It writes a day's totals to the team's
own table (examples.models.DailyTotal) and, given a ``bucket``, a summary to the team's
bucket, both through workers.jobs.fencing: an attempt frozen past its lease that wakes up
after its successor wrote gets StaleAttempt, and the successor's values stay.
"""

import csv
import json
import os
from decimal import Decimal
from functools import cache

from workers.jobs import JobContext, fenced_put, fenced_update_or_create, scheduler_job

SKUS = (("SKU-1001", "249.00"), ("SKU-1002", "129.50"), ("SKU-1003", "39.99"), ("SKU-1004", "54.00"),
        ("SKU-1005", "24.75"), ("SKU-1006", "12.00"), ("SKU-1007", "29.95"), ("SKU-1008", "44.10"))
BATCH_ROWS = 20_000  # rows between checkpoints and progress reports
MAX_ROWS = 100_000_000

ORDERS_CSV_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "rows": {"type": "integer", "minimum": 0, "maximum": MAX_ROWS, "default": 1000},
        "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"], "default": "USD"},
    },
}


@scheduler_job(
    "examples.orders_csv",
    resource_class="long",
    lease_seconds=60,
    timeout_seconds=3600,
    max_attempts=3,
    params_schema=ORDERS_CSV_SCHEMA,
)
def orders_csv(ctx: JobContext) -> None:
    rows = int(ctx.params.get("rows", 1000))
    currency = ctx.params.get("currency", "USD")
    day = ctx.local_date()
    ctx.logger.info("exporting %d orders of %s for tenant %s (attempt %d)", rows, day, ctx.tenant.name, ctx.attempt)
    seed = int(ctx.scheduled_at.timestamp())
    with ctx.output("text/csv", f"orders-{day.isoformat()}.csv") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["order_id", "order_date", "customer_id", "sku", "quantity", "unit_price", "currency"])
        for start in range(0, rows, BATCH_ROWS):
            ctx.checkpoint()
            writer.writerows(_order(seed, n, day, currency) for n in range(start, min(rows, start + BATCH_ROWS)))
            done = min(rows, start + BATCH_ROWS)
            ctx.progress(done / rows, f"{done:,} of {rows:,} rows")
    ctx.progress(1.0, f"{rows:,} rows exported")


def _order(seed: int, n: int, day, currency: str) -> tuple:
    mix = (seed + n * 2654435761) & 0xFFFFFFFF  # Knuth's multiplicative hash: spread, cheap, stable
    sku, price = SKUS[mix % len(SKUS)]
    return (f"ORD-{seed % 100000:05d}-{n:09d}", day.isoformat(), f"CUST-{mix % 9973:04d}", sku,
            1 + (mix >> 8) % 5, price, currency)


DAILY_TOTALS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "orders": {"type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 1000},
        "bucket": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"},
    },
}


@scheduler_job("examples.daily_totals", resource_class="short", lease_seconds=30, timeout_seconds=600,
               max_attempts=3, params_schema=DAILY_TOTALS_SCHEMA)
def daily_totals(ctx: JobContext) -> bytes:
    from examples.models import DailyTotal

    day = ctx.local_date()
    seed = int(ctx.scheduled_at.timestamp())
    orders = [_order(seed, n, day, "USD") for n in range(int(ctx.params.get("orders", 1000)))]
    revenue = sum((Decimal(price) * quantity for *_, quantity, price, _ in orders), Decimal("0.00"))
    ctx.checkpoint()
    # One guarded statement: refused (StaleAttempt) once a later attempt of this run has written the row.
    fenced_update_or_create(ctx, DailyTotal, day=day,
                            defaults={"orders": len(orders), "revenue": revenue, "written_by_attempt": ctx.attempt})
    summary = json.dumps({"day": day.isoformat(), "orders": len(orders), "revenue": str(revenue)}).encode()
    if ctx.params.get("bucket"):
        fenced_put(ctx, _team_s3(), ctx.params["bucket"], f"daily-totals/{day.isoformat()}.json", summary,
                   content_type="application/json")
    return summary


@cache
def _team_s3():
    """The team's own S3 client (its endpoint from TEAM_S3_ENDPOINT_URL, e.g. a MinIO; AWS
    when unset), credentials from the usual AWS_* variables."""
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("TEAM_S3_ENDPOINT_URL") or None)
