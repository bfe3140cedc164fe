"""Retry delay: bounded exponential backoff with jitter (pure)."""

import random


def retry_delay_seconds(failed_attempts: int, initial: float, maximum: float, rng=random) -> float:
    """Delay before the next attempt after ``failed_attempts`` failures (>= 1).

    "Equal jitter": half the exponential step is kept so retries never bunch at zero,
    the other half is random so a fleet of failed runs does not retry in lockstep.
    """
    step = min(maximum, initial * (2 ** max(0, failed_attempts - 1)))
    return step / 2 + rng.uniform(0, step / 2)
