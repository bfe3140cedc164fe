"""Jobs of the real-process tests of the job-side guarantees, a team module named in SCHEDULER_JOB_MODULES,
each held by a gate (a directory, $JOB_GATE) the test opens:

- fencing.proof (tests/e2e/test_job_fencing.py): its first attempt stops at the gate until
  the test opens it, then writes through the fencing helpers like any later attempt, and
  reports what it was told;
- replay.until_fixed (tests/e2e/test_replay_embedded.py): fails for good until the gate
  holds ``fixed``, then succeeds."""

import json
import os
import time
from pathlib import Path

from examples.jobs import _team_s3
from examples.models import DailyTotal
from workers.jobs import (
    JobContext,
    PermanentJobError,
    StaleAttempt,
    fenced_put,
    fenced_update_or_create,
    scheduler_job,
)

PROOF_JOB = "fencing.proof"
REPLAY_JOB = "replay.until_fixed"
KEY = "totals/today.json"


@scheduler_job(PROOF_JOB, resource_class="short", lease_seconds=2, timeout_seconds=120, max_attempts=3,
               initial_delay_seconds=0, max_delay_seconds=0,
               params_schema={"type": "object", "additionalProperties": False,
                              "properties": {"bucket": {"type": "string"}}})
def proof(ctx: JobContext) -> bytes:
    gate = Path(os.environ["JOB_GATE"])
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


@scheduler_job(REPLAY_JOB, resource_class="short", lease_seconds=10, timeout_seconds=60, max_attempts=1)
def until_fixed(ctx: JobContext) -> bytes:
    if not (Path(os.environ["JOB_GATE"]) / "fixed").exists():
        raise PermanentJobError("upstream down")
    return f"fixed, fence {ctx.fence}".encode()
