"""The work intake: claim claimable runs of a resource class through the authority and
execute them. The Celery hint task (workers.tasks), idle claims (workers.idle_claims) and
the embedded pool (workers.embedded_pool) all take work through ``take``; the HTTP claim
view has only the claim half, through ``claim``.

Where they differ on purpose, the difference is a parameter: how many runs a claim takes
(``limit``: a hint's worth, a free process's batch, every free slot's batch), what becomes
of claimable runs of job types this process has no code for (``unknown``), what happens
between the claim and the execution (``on_claimed``), and who executes (``execute``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from runs import authority
from runs.models import Run
from workers import batching
from workers.jobs.framework import declared_jobs

if TYPE_CHECKING:
    from workers.runtime import ExecutionOutcome

log = logging.getLogger(__name__)

# What a claim that came up short does about claimable runs of job types this process lacks
# (runs.authority.unknown_job_types); None: nothing.
COUNT = "count"  # count them: no hint brought the claim here, so none goes back to the relay
REOFFER = "reoffer"  # count them and hand their hints back to the relay, for a process that has the code


def claim(*, resource_classes, worker_label: str, limit: int = 1, worker_token=None, lease_seconds: int | None = None,
          any_job_type: bool = False, unknown: str | None = None) -> list[Run]:
    """Claim up to ``limit`` runs of ``resource_classes`` (all when None) in one transaction:
    only of the job types this process has code for, unless ``any_job_type`` (an HTTP worker
    brings its own code, whatever this process declares). Runs of other job types stay
    queued; when fewer than ``limit`` were claimed, ``unknown`` says what is done about them."""
    job_types = None if any_job_type else list(declared_jobs())
    runs = authority.claim_many(n=limit, worker_token=worker_token, worker_label=worker_label,
                                resource_classes=resource_classes, lease_seconds=lease_seconds, job_types=job_types)
    if unknown and job_types is not None and len(runs) < limit:
        try:  # only a report (and a re-offer): the claimed runs' leases are running, execute them
            authority.pass_over(spare=limit - len(runs), resource_classes=resource_classes or [],
                                job_types=job_types, reoffer=unknown == REOFFER)
        except Exception:
            log.warning("could not pass over runs of job types this worker lacks", exc_info=True)
    return runs


def take(resource_class: str, *, worker_label: str, limit: int, unknown: str | None,
         lease_seconds: int | None = None, on_claimed=None, execute=None) -> list:
    """Claim up to ``limit`` runs of ``resource_class``, call ``on_claimed(runs)`` (when
    given and something was claimed), then execute them: ``execute(runs)`` when given, else
    ``execute_claimed_runs`` here. What the execution returned (the runs' outcomes by
    default); empty when nothing was claimable."""
    runs = claim(resource_classes=[resource_class], worker_label=worker_label, limit=limit,
                 lease_seconds=lease_seconds, unknown=unknown)
    if not runs:
        return []
    if on_claimed is not None:
        on_claimed(runs)
    return execute(runs) if execute is not None else execute_claimed_runs(resource_class, runs)


def execute_claimed_runs(resource_class: str, runs: list[Run], *, claimed_at: float | None = None,
                         executor=None) -> list[ExecutionOutcome]:
    """Execute runs of ``resource_class`` this host claimed at monotonic ``claimed_at`` (now
    when None): on this thread (runtime.execute_batch), or through ``executor(runs,
    claimed_at)`` (a job process of the embedded pool). Then the next claims of the class are
    sized by how long these jobs took (workers.batching)."""
    from workers.runtime import execute_batch  # here: the web process, which only claims, never loads the runtime

    executed = executor(runs, claimed_at) if executor is not None else execute_batch(runs, claimed_at=claimed_at)
    batching.observe(resource_class, len(executed), sum(done.job_seconds for done in executed))
    return executed


def claim_and_execute(*, resource_classes: list[str], worker_label: str, limit: int = 1) -> list[ExecutionOutcome]:
    """``take`` for one resource class as a hint would (``REOFFER``): what tests, benchmarks
    and one-off scripts call to work off the queue in this process."""
    [resource_class] = resource_classes
    return take(resource_class, worker_label=worker_label, limit=limit, unknown=REOFFER)
