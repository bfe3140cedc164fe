"""How many runs a hint claims at once.

A hint is worth up to ``CLAIM_BATCH[resource class]`` claims (the relay sends one hint per
that many dispatch intents). A process claims fewer while its jobs take long: a batch is
executed one run after another, so its size is held to what this process can execute in
about ``BATCH_SECONDS``, judged by the jobs it ran (an exponential average per resource
class of the time in the jobs themselves: the authority's bookkeeping is what batching saves).
It starts at one claim and at most doubles per batch, as a TCP window does, so a
first batch of long jobs never waits behind itself. What a hint is worth beyond what its
process claimed is passed on in a new hint, for any free process to take.
"""

import threading

from django.conf import settings

BATCH_SECONDS = 0.1
SMOOTHING = 0.2  # weight of the newest batch in the per-job average

_lock = threading.Lock()
_windows: dict[str, int] = {}  # resource class -> the claim size this process reached
_per_job: dict[str, float] = {}  # resource class -> average seconds per executed run


def class_batch(resource_class: str) -> int:
    return max(1, settings.CLAIM_BATCH.get(resource_class, 1))


def claim_size(resource_class: str, worth: int) -> int:
    """How many of a hint's ``worth`` claims this process takes now."""
    with _lock:
        return max(1, min(worth, class_batch(resource_class), _windows.get(resource_class, 1)))


def observe(resource_class: str, executed: int, seconds: float) -> None:
    """The jobs of a batch of ``executed`` runs took ``seconds`` in all: set the next claim size."""
    if executed <= 0:
        return
    with _lock:
        per_job = seconds / executed
        average = _per_job.get(resource_class)
        average = per_job if average is None else (1 - SMOOTHING) * average + SMOOTHING * per_job
        _per_job[resource_class] = average
        affordable = int(BATCH_SECONDS / average) if average > 0 else class_batch(resource_class)
        grown = 2 * _windows.get(resource_class, 1)
        _windows[resource_class] = max(1, min(affordable, grown, class_batch(resource_class)))
