"""Prometheus metrics. The primary alert is due-to-start lateness by tenant and class.

Processes record events as they happen; with PROMETHEUS_MULTIPROC_DIR set (make run,
docker-compose), /metrics aggregates every process on the host. Gauges that describe the
backlog are read from the database at scrape time, so they are right whoever asks.
"""

import hmac
import os

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from kernel.errors import Unauthenticated

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)

DUE_TO_START = Histogram(
    "scheduler_due_to_start_seconds",
    "Lateness of a run's first start against its due instant.",
    ["tenant", "resource_class"],
    buckets=LATENCY_BUCKETS,
)
QUEUE_DELAY = Histogram(
    "scheduler_queue_delay_seconds",
    "Time an attempt waited claimable (due or re-queued) before it was claimed.",
    ["resource_class"],
    buckets=LATENCY_BUCKETS,
)
EXECUTION = Histogram(
    "scheduler_execution_seconds",
    "Duration of an attempt from claim to accepted completion.",
    ["resource_class", "outcome"],
    buckets=LATENCY_BUCKETS,
)
EXPIRED_LEASES = Counter("scheduler_expired_leases_total", "Attempts whose lease passed.")
STALE_REJECTIONS = Counter(
    "scheduler_stale_fence_rejections_total", "Worker calls refused because their fence was stale.", ["operation"]
)
CREDENTIAL_REFUSALS = Counter(
    "scheduler_worker_credential_refusals_total",
    "Worker calls refused because the attempt belongs to another worker credential.",
    ["operation"],
)
SKIPPED = Counter("scheduler_skipped_occurrences_total", "Occurrences recorded as skipped.", ["reason"])
PUBLICATION_FAILURES = Counter(
    "scheduler_publication_failures_total", "Result uploads or publications that failed.", ["stage"]
)
UNKNOWN_JOB_TYPE = Counter(
    "scheduler_unknown_job_type_runs_total",
    "Claimable runs a worker left queued because it has no code for their job type (mixed deployments).",
    ["job_type", "resource_class"],
)
IDLE_CLAIMED = Counter(
    "scheduler_idle_claimed_runs_total",
    "Runs a Celery worker process claimed from the authority because its queue had given the worker"
    " nothing for IDLE_CLAIM_SECONDS (hints lost, or the broker away).",
    ["resource_class"],
)
MATERIALIZED = Counter("scheduler_materialized_occurrences_total", "Occurrences materialized.")
TIMERS_FIRED = Counter("scheduler_scan_timers_fired_total", "Scanner timers fired at their due instant.")
SHADOW_DISAGREEMENTS = Counter(
    "scheduler_recurrence_shadow_disagreements_total",
    "Next instants on which a shadow recurrence engine disagreed with the active one.", ["candidate"],
)


class BacklogCollector:
    """Backlog gauges straight from the authoritative tables."""

    def collect(self):
        from runs.models import UNFINISHED, Run, RunState

        oldest = GaugeMetricFamily(
            "scheduler_oldest_admitted_due_seconds",
            "Age of the oldest claimable run's due time.",
            labels=["resource_class"],
        )
        depth = GaugeMetricFamily("scheduler_runs", "Runs by state and resource class.", labels=["state", "resource_class"])
        now = timezone.now()
        for row in (
            Run.objects.filter(state=RunState.QUEUED).values("resource_class").annotate(oldest=Min("due_at"))
        ):
            oldest.add_metric([row["resource_class"]], max(0.0, (now - row["oldest"]).total_seconds()))
        for row in (
            Run.objects.filter(UNFINISHED)
            .values("state", "resource_class")
            .annotate(n=Count("id"))
        ):
            depth.add_metric([row["state"], row["resource_class"]], row["n"])
        yield oldest
        yield depth
        yield open_effects()
        yield open_incidents()


def open_incidents() -> GaugeMetricFamily:
    """Open health incidents by tenant and kind (never by schedule: the cardinality stays
    tenants x 4), one grouped read of the open-incident index."""
    from runs.health.selectors import open_incident_counts
    from runs.models import IncidentKind

    gauge = GaugeMetricFamily("scheduler_open_incidents", "Open schedule health incidents by tenant and kind.",
                              labels=["tenant", "kind"])
    counts = open_incident_counts()
    for tenant in sorted({tenant for tenant, _ in counts}):
        for kind in IncidentKind.values:
            gauge.add_metric([tenant, kind], counts.get((tenant, kind), 0))
    return gauge


def open_effects() -> GaugeMetricFamily:
    """Effect intents still open (pending delivery, or uncertain) by state, from the partial index."""
    from runs.models import EffectIntent, EffectState

    gauge = GaugeMetricFamily("scheduler_effects", "Open effect intents by state.", labels=["state"])
    open_states = (EffectState.PENDING, EffectState.UNCERTAIN)
    counts = dict(EffectIntent.objects.filter(state__in=open_states).values_list("state").annotate(n=Count("id")))
    for state in open_states:
        gauge.add_metric([state], counts.get(state, 0))
    return gauge


def metrics_view(request):
    """The scrape endpoint; with METRICS_TOKEN set, only for `Authorization: Bearer <token>`."""
    if settings.METRICS_TOKEN and not _bearer_matches(request, settings.METRICS_TOKEN):
        refused = Unauthenticated("/metrics requires Authorization: Bearer <METRICS_TOKEN>")
        body = {"error": {"code": refused.code, "message": refused.message, "details": {}}}
        return JsonResponse(body, status=refused.status, headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    output = generate_latest(event_registry())
    from runs.capacity.gauges import CapacityCollector

    backlog = CollectorRegistry()
    backlog.register(BacklogCollector())
    backlog.register(CapacityCollector())
    output += generate_latest(backlog)
    return HttpResponse(output, content_type=CONTENT_TYPE_LATEST)


def event_registry():
    """The event metrics as /metrics shows them: this process's, or every process's on the
    host when PROMETHEUS_MULTIPROC_DIR is set."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def counter_total(name: str) -> float:
    """The sum over every label set of counter `name` (without its _total suffix)."""
    return sum(
        sample.value
        for family in event_registry().collect()
        if family.name == name
        for sample in family.samples
        if sample.name == f"{name}_total"
    )


def _bearer_matches(request, token: str) -> bool:
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    # Compared in constant time: the token must not leak through response timing.
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


class counting_stale:
    """Count StaleFence refusals of one worker operation; the error still propagates."""

    def __init__(self, operation: str):
        self.operation = operation

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from kernel.errors import StaleFence

        if exc_type is not None and issubclass(exc_type, StaleFence):
            STALE_REJECTIONS.labels(self.operation).inc()
        return False
