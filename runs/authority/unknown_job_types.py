"""Runs a worker leaves queued because it has no code for their job type.

During a rollout old and new workers run side by side: a worker claims only runs of the job
types it declares (``claim_many(job_types=...)``), and the others stay queued for a worker
that has them. ``pass_over`` says so: it counts them in
``scheduler_unknown_job_type_runs_total{job_type, resource_class}`` and, for a worker that
came through a broker hint, hands that hint back to the relay, so another worker gets it
soon instead of after the lost-hint backstop (``RELAY_REPUBLISH_AFTER_SECONDS``). A hint
handed back waits a second per time it was published (at most ``REOFFER_MAX_SECONDS``), so
a job type no worker has costs one hint per run every half minute, not a loop.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Value
from django.db.models.functions import Least, Now

from runs import metrics
from runs.authority.statements.outbox import outbox_in_id_order
from runs.models import Outbox, OutboxKind, Run, RunState

REOFFER_MAX_SECONDS = 30
# pass_over looks among the first this many claimable runs, in due order: a partial claim
# costs a bounded read however long the queue, and a run further back is found when the
# queue ahead of it has drained.
PASS_OVER_WINDOW = 1000


def pass_over(*, spare: int, resource_classes, job_types, reoffer: bool) -> dict[str, int]:
    """Claimable runs in ``resource_classes`` of job types not in ``job_types``, up to
    ``spare`` of them (the claims the caller could have made): counted, and with ``reoffer``
    their dispatch hints republished after a short delay. Returns {job type: runs}."""
    if spare <= 0:
        return {}
    claimable = Run.objects.filter(state=RunState.QUEUED, due_at__lte=Now(), resource_class__in=list(resource_classes))
    window = claimable.order_by("due_at").values("id")[:PASS_OVER_WINDOW]
    unknown = list(
        Run.objects.filter(id__in=window)
        .exclude(job_type__in=list(job_types))
        .order_by("due_at")
        .values_list("id", "job_type", "resource_class")[:spare]
    )
    counts: dict[tuple[str, str], int] = {}
    for _, job_type, resource_class in unknown:
        counts[job_type, resource_class] = counts.get((job_type, resource_class), 0) + 1
    for (job_type, resource_class), n in counts.items():
        metrics.UNKNOWN_JOB_TYPE.labels(job_type, resource_class).inc(n)
    if reoffer and unknown:
        delay = ExpressionWrapper(
            Value(timedelta(seconds=1)) * Least(F("publish_attempts"), Value(REOFFER_MAX_SECONDS)),
            output_field=DurationField(),
        )
        spent = Outbox.objects.filter(
            run_id__in=[run_id for run_id, _, _ in unknown], kind=OutboxKind.DISPATCH,
            processed_at__isnull=True, published_at__isnull=False,
        )
        # Skipping rows another transaction holds (outbox_in_id_order): a claim by a worker that knows
        # the job type spending the hint, or another worker reoffering it, makes this one moot.
        with transaction.atomic():
            outbox_in_id_order(spent, skip_locked=True).update(
                published_at=None, relay_until=ExpressionWrapper(Now() + delay, output_field=DateTimeField()))
    totals: dict[str, int] = {}
    for (job_type, _), n in counts.items():
        totals[job_type] = totals.get(job_type, 0) + n
    return totals
