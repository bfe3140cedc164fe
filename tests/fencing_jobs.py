"""The job of the fencing proof (tests/e2e/test_job_fencing.py), a team module named in
SCHEDULER_JOB_MODULES: its first attempt stops at a gate until the test opens it, then
writes through the fencing helpers like any later attempt, and reports what it was told."""

import json
import os
import time
from pathlib import Path

from examples.jobs import _team_s3
from examples.models import DailyTotal
from workers.jobs import JobContext, StaleAttempt, fenced_put, fenced_update_or_create, scheduler_job

PROOF_JOB = "fencing.proof"
KEY = "totals/today.json"


@scheduler_job(PROOF_JOB, resource_class="short", lease_seconds=2, timeout_seconds=120, max_attempts=3,
               initial_delay_seconds=0, max_delay_seconds=0,
               params_schema={"type": "object", "additionalProperties": False,
                              "properties": {"bucket": {"type": "string"}}})
def proof(ctx: JobContext) -> bytes:
    gate = Path(os.environ["FENCING_GATE"])
    (gate / f"claimed-{ctx.attempt}").write_text(str(ctx.fence))
    while ctx.attempt == 1 and not (gate / "open").exists():
        time.sleep(0.05)  # not ctx.sleep(): a frozen-then-resumed job must reach its writes
    told = {"fence": ctx.fence, "stillOwner": ctx.still_owner()}
    value = f"attempt {ctx.attempt}"
    writes = {
        "table": lambda: fenced_update_or_create(ctx, DailyTotal, day=ctx.local_date(), defaults={
            "orders": ctx.attempt, "revenue": 0, "written_by_attempt": ctx.attempt}),
        "bucket": lambda: fenced_put(ctx, _team_s3(), ctx.params["bucket"], KEY, value.encode()),
    }
    for name, write in writes.items():
        try:
            write()
            told[name] = "written"
        except StaleAttempt as exc:
            told[name] = f"StaleAttempt: {exc}"
    (gate / f"told-{ctx.attempt}.json").write_text(json.dumps(told))
    if any(str(answer).startswith("StaleAttempt") for answer in told.values()):
        raise StaleAttempt("a later attempt wrote first")
    return value.encode()
