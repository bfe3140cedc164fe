"""Lease arithmetic: how long an attempt's lease runs, and its job type's timeout, on
authority time. Pure: no database."""

from datetime import timedelta

from django.conf import settings


def lease_until(now, seconds: int, deadline=None):
    """A lease of ``seconds`` from ``now``, never past the attempt's ``deadline`` (its job
    type's timeout) by more than JOB_TIMEOUT_LEASE_GRACE_SECONDS: past its timeout no
    heartbeat keeps an attempt alive, whatever the worker's clock says."""
    until = now + timedelta(seconds=seconds)
    if deadline is None:
        return until
    return min(until, deadline + timedelta(seconds=settings.JOB_TIMEOUT_LEASE_GRACE_SECONDS))


def attempt_deadline(now, payload: dict):
    """When an attempt started at ``now`` of a run with ``payload`` times out; None for no timeout."""
    timeout = payload.get("timeoutSeconds")
    return now + timedelta(seconds=float(timeout)) if timeout else None


def clamp_lease(seconds: int) -> int:
    return max(1, min(int(seconds), settings.MAX_LEASE_SECONDS))
