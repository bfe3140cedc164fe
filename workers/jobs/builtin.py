"""The built-in jobs: the sales report (report.sales) and the demo jobs (demo.*).

Each is declared the way a team declares its own (README, "Add your first job"): one
``@scheduler_job`` holds its catalog entry and its code.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re
import zipfile
from dataclasses import dataclass
from datetime import date, datetime, timezone as dt_timezone
from decimal import Decimal

from workers.jobs.framework import (
    JobContext,
    JobOutput,
    PermanentJobError,
    TransientJobError,
    scheduler_job,
)


def _iso_z(instant: datetime) -> str:
    return instant.astimezone(dt_timezone.utc).isoformat().replace("+00:00", "Z")


def _seconds_param(params: dict) -> float:
    seconds = params.get("seconds", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= 86400:
        raise PermanentJobError(f"seconds must be a number from 0 to 86400, got {seconds!r}")
    return float(seconds)


class _Draws:
    """Deterministic draws from SHA-256 in counter mode: the same on every host and Python
    version (random.Random makes no cross-version promise)."""

    def __init__(self, seed: bytes):
        self.seed, self.counter = seed, 0

    def below(self, n: int) -> int:
        block = hashlib.sha256(self.seed + self.counter.to_bytes(8, "big")).digest()
        self.counter += 1
        return int.from_bytes(block[:8], "big") % n


# ---------------------------------------------------------------- report.sales

REGIONS = {
    "us": ("United States", "USD"),
    "eu": ("Europe", "EUR"),
    "apac": ("Asia-Pacific", "SGD"),
    "latam": ("Latin America", "BRL"),
}
PRODUCTS = (
    ("SKU-1001", "Espresso Machine", Decimal("249.00")),
    ("SKU-1002", "Burr Grinder", Decimal("129.50")),
    ("SKU-1003", "Milk Frother", Decimal("39.99")),
    ("SKU-1004", "Pour-Over Kettle", Decimal("54.00")),
    ("SKU-1005", "Salt & Pepper Mill Set", Decimal("24.75")),
    ("SKU-1006", "Ceramic Mug <12oz>", Decimal("12.00")),
    ("SKU-1007", "Cold Brew Jar", Decimal("29.95")),
    ("SKU-1008", "Digital Scale", Decimal("44.10")),
    ("SKU-1009", "Paper Filters (100)", Decimal("6.49")),
    ("SKU-1010", "Coffee Beans 1kg \"House\"", Decimal("27.80")),
    ("SKU-1011", "Tamper", Decimal("19.00")),
    ("SKU-1012", "Descaler", Decimal("9.99")),
)
CSV_COLUMNS = ("order_id", "order_date", "order_time", "customer_id", "sku", "product",
               "quantity", "unit_price", "amount", "currency")
TOP_PRODUCTS = 5
# ZIP stores an MS-DOS timestamp per entry; a fixed one keeps the archive byte-identical.
ZIP_TIMESTAMP = (1980, 1, 1, 0, 0, 0)
DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class SalesOrder:
    order_id: str
    time: str
    customer_id: str
    sku: str
    product: str
    quantity: int
    unit_price: Decimal
    amount: Decimal


def sales_orders(region: str, day: date) -> list[SalesOrder]:
    """The deterministic sample sales of one region on one day."""
    draws = _Draws(hashlib.sha256(f"{region}{day.isoformat()}".encode()).digest())
    drawn = []
    for i in range(45 + draws.below(11)):
        product = PRODUCTS[draws.below(len(PRODUCTS))]
        quantity = 1 + draws.below(3) * draws.below(5) + draws.below(3)  # mostly small, a few bulk
        at = f"{8 + draws.below(12):02d}:{draws.below(60):02d}"
        drawn.append((at, i, product, quantity, f"C{10000 + draws.below(90000)}"))
    return [
        SalesOrder(order_id=f"SO-{region.upper()}-{day:%Y%m%d}-{n:03d}", time=at, customer_id=customer,
                   sku=sku, product=name, quantity=quantity, unit_price=price, amount=price * quantity)
        for n, (at, _, (sku, name, price), quantity, customer) in enumerate(sorted(drawn), start=1)
    ]


def sales_csv(orders: list[SalesOrder], day: date, currency: str) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for o in orders:
        writer.writerow((o.order_id, day.isoformat(), o.time, o.customer_id, o.sku, o.product,
                         o.quantity, f"{o.unit_price:.2f}", f"{o.amount:.2f}", currency))
    return out.getvalue().encode()


def product_totals(orders: list[SalesOrder]) -> list[tuple[str, str, int, Decimal]]:
    """(sku, product, units, revenue) per product sold, highest revenue first."""
    totals: dict[str, list] = {}
    for o in orders:
        row = totals.setdefault(o.sku, [o.sku, o.product, 0, Decimal("0")])
        row[2] += o.quantity
        row[3] += o.amount
    return sorted((tuple(r) for r in totals.values()), key=lambda r: (-r[3], r[0]))


def sales_summary_html(orders: list[SalesOrder], region: str, day: date, currency: str) -> bytes:
    e = html.escape
    label = REGIONS[region][0]
    revenue = sum((o.amount for o in orders), Decimal("0"))
    units = sum(o.quantity for o in orders)
    products = product_totals(orders)
    top = "\n".join(
        f'<tr class="top-product"><td>{e(sku)}</td><td>{e(name)}</td>'
        f'<td class="units">{n}</td><td class="revenue">{amount:.2f}</td></tr>'
        for sku, name, n, amount in products[:TOP_PRODUCTS]
    )
    recent = "\n".join(
        f"<tr><td>{e(o.order_id)}</td><td>{e(o.time)}</td><td>{e(o.product)}</td>"
        f"<td>{o.quantity}</td><td>{o.amount:.2f}</td></tr>"
        for o in sorted(orders, key=lambda o: (-o.amount, o.order_id))[:10]
    )
    title = e(f"Sales report — {label} — {day.isoformat()}")
    document = f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}</style>
</head>
<body>
<h1>{title}</h1>
<table class="totals">
<tr><th>Orders</th><td id="total-orders">{len(orders)}</td></tr>
<tr><th>Units</th><td id="total-units">{units}</td></tr>
<tr><th>Revenue ({e(currency)})</th><td id="total-revenue">{revenue:.2f}</td></tr>
</table>
<h2>Top products</h2>
<table class="top-products">
<tr><th>SKU</th><th>Product</th><th>Units</th><th>Revenue</th></tr>
{top}
</table>
<h2>Largest orders</h2>
<table class="largest-orders">
<tr><th>Order</th><th>Time</th><th>Product</th><th>Qty</th><th>Amount</th></tr>
{recent}
</table>
</body>
</html>
"""
    return document.encode()


def deterministic_zip(files: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIMESTAMP)
            # Stored, not deflated: compressed bytes depend on the host's zlib build, and a
            # retry on another host must reproduce the checksum. The files are a few KB.
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


@scheduler_job(
    "report.sales",
    resource_class="short",
    lease_seconds=30,
    timeout_seconds=300,
    max_attempts=3,
    uncertain_effect_policy="hold",
    params_schema_version=1,
    params_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "region": {"type": "string", "enum": ["us", "eu", "apac", "latam"]},
            "date": {"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        },
    },
)
def report_sales(ctx: JobContext) -> JobOutput:
    region = ctx.params.get("region", "us")
    if region not in REGIONS:
        raise PermanentJobError(f"unknown region {region!r}")
    raw_date = ctx.params.get("date")
    if raw_date is None:
        day = ctx.local_date()
    else:
        try:
            if not isinstance(raw_date, str) or not DATE_PATTERN.match(raw_date):
                raise ValueError
            day = date.fromisoformat(raw_date)
        except ValueError:
            raise PermanentJobError(f"date must be YYYY-MM-DD, got {raw_date!r}") from None
    currency = REGIONS[region][1]
    ctx.checkpoint()
    orders = sales_orders(region, day)
    ctx.checkpoint()
    table = sales_csv(orders, day, currency)
    ctx.checkpoint()
    summary = sales_summary_html(orders, region, day, currency)
    ctx.checkpoint()
    stem = f"sales-{region}-{day.isoformat()}"
    archive = deterministic_zip([(f"{stem}.csv", table), ("summary.html", summary)])
    return JobOutput(archive, "application/zip", f"{stem}.zip")


# ---------------------------------------------------------------- demo jobs

FAIL_MODES = ("never", "transient", "permanent")


@scheduler_job(
    "demo.sleep",
    resource_class="short",
    lease_seconds=30,
    timeout_seconds=3600,
    max_attempts=3,
    uncertain_effect_policy="retry",
    params_schema_version=1,
    params_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "maximum": 86400},
            "fail": {"type": "string", "enum": ["never", "transient", "permanent"]},
        },
    },
)
def demo_sleep(ctx: JobContext) -> JobOutput:
    seconds = _seconds_param(ctx.params)
    fail = ctx.params.get("fail", "never")
    if fail not in FAIL_MODES:
        raise PermanentJobError(f"fail must be one of {', '.join(FAIL_MODES)}, got {fail!r}")
    ctx.sleep(seconds)
    if fail == "transient":
        raise TransientJobError("demo.sleep: requested transient failure")
    if fail == "permanent":
        raise PermanentJobError("demo.sleep: requested permanent failure")
    document = {"jobType": "demo.sleep", "runId": ctx.run_id, "scheduledAt": _iso_z(ctx.scheduled_at),
                "seconds": seconds}
    data = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    return JobOutput(data, "application/json", f"sleep-{ctx.run_id}.json")


EXPORT_ROWS = 20_000  # 55-byte rows: a little over 1 MiB
EXPORT_CHUNKS = 20


@scheduler_job(
    "demo.export",
    resource_class="long",
    lease_seconds=60,
    timeout_seconds=3600,
    max_attempts=2,
    uncertain_effect_policy="hold",
    params_schema_version=1,
    params_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 86400}},
    },
)
def demo_export(ctx: JobContext) -> JobOutput:
    seconds = _seconds_param(ctx.params)
    seed = hashlib.sha256(f"{ctx.run_id}|{_iso_z(ctx.scheduled_at)}".encode()).digest()
    parts = ["row,key,amount_cents\n"]
    per_chunk = EXPORT_ROWS // EXPORT_CHUNKS
    for chunk in range(EXPORT_CHUNKS):
        ctx.sleep(seconds / EXPORT_CHUNKS)  # the long part, spread so checkpoints stay frequent
        for n in range(chunk * per_chunk, (chunk + 1) * per_chunk):
            digest = hashlib.sha256(seed + n.to_bytes(8, "big")).digest()
            parts.append(f"{n:08d},{digest[:16].hex()},{int.from_bytes(digest[16:22], 'big') % 10**12:012d}\n")
    return JobOutput("".join(parts).encode(), "text/csv", f"export-{ctx.run_id}.csv")
