"""Real Celery tasks, as a team's `tasks.py` holds them, run through the celery.task bridge.

Imported by the test process and, through SCHEDULER_JOB_MODULES, by the Celery workers the
end-to-end test starts; `record` appends one line per call to a file, so a test counts calls
across processes.
"""

from celery import shared_task


@shared_task(name="tests.bridge.record")
def record(ledger: str, label: str) -> dict:
    with open(ledger, "a") as file:
        file.write(f"{label}\n")
    return {"recorded": label, "numbers": [1, 2.5, None]}


@shared_task(name="tests.bridge.add")
def add(a: int, b: int, *, scale: int = 1) -> dict:
    return {"sum": (a + b) * scale}


@shared_task(name="tests.bridge.with_context", bind=True)
def with_context(self, label: str, scheduler_context=None) -> dict:
    scheduler_context.checkpoint()
    return {"label": label, "runId": scheduler_context.run_id, "task": self.name}


@shared_task(name="tests.bridge.not_json")
def not_json() -> object:
    return object()


@shared_task(name="tests.bridge.flaky", bind=True)
def flaky(self) -> None:
    raise self.retry()


class Unavailable(Exception):
    pass


@shared_task(name="tests.bridge.autoretry", autoretry_for=(Unavailable,))
def autoretry() -> None:
    raise Unavailable("the partner API is down")


@shared_task(name="tests.bridge.hold")
def hold(megabytes: int) -> dict:
    """Holds ``megabytes`` of written (so resident) memory while it runs: what a memory
    measurement of the process running a job must see."""
    held = b"x" * (megabytes * 1024 * 1024)
    return {"held": len(held)}
