"""Schedules with expectations and runs through the real authority, for the health tests."""

from datetime import timedelta

from runs import authority
from runs.models import Run
from kernel.clock import authority_now
from tests.authority_steps import create_schedule, make_due

ALERT = {"email": {"to": ["ops@example.com"]}, "webhook": {"url": "http://hooks.example.com/health"}}


def expecting(tenant, name="s", alert=None, **expectations):
    """A yearly schedule (one instant per make_due) whose occurrences may overlap."""
    given = {**expectations, **({"alert": alert} if alert else {})}
    return create_schedule(tenant, name=name, overlapPolicy="allow", retry={"maxAttempts": 1},
                           expectations=given)


def later(seconds: float):
    """Database time `seconds` from now: what a health pass would read then."""
    return authority_now() + timedelta(seconds=seconds)


def materialize(schedule, *, ago=timedelta(seconds=1)) -> Run:
    instant = make_due(schedule, ago=ago)
    authority.materialize_due()
    return Run.objects.get(schedule=schedule, scheduled_at=instant)


def claim_all():
    """Claim every queued run (a worker returning): the claimed runs, oldest due first."""
    claimed = []
    while (run := authority.claim(worker_label="test-worker", lease_seconds=600)) is not None:
        claimed.append(run)
    return claimed


def fail(run: Run) -> Run:
    return authority.complete(run_id=run.id, attempt_id=run.current_attempt_id, fence=run.fence, outcome="failed",
                              error="boom")
