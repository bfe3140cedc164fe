"""examples.orders_csv: a CSV export streamed through ``ctx.output()``, row by row.

However many rows it writes, the export never sits in the worker's memory: the rows go to
a spool file and the object store receives it in chunks. It shows the rest of the job
context too: params, the scheduled instant in the schedule's zone, the tenant, the
attempt, ``checkpoint()``, the run's logger and ``progress()``.

The rows are synthetic but deterministic: the same params and scheduled instant give the
same bytes on every attempt and host, as every job must (a retried upload has to match).
"""

import csv

from workers.jobs import JobContext, scheduler_job

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
