"""Schedule health: the open incidents first (since when, which occurrence), then the
latest resolved ones, each linked to its schedule and run."""

from django.db.models import Q
from django.shortcuts import render

from console import filters
from console.access import staff_only
from runs.models import Incident


@staff_only
def health(request):
    before = filters.keyset(request.GET, "before")  # pages the resolved ones
    incidents = Incident.objects.select_related("schedule", "tenant")
    open_ = list(incidents.filter(resolved_at__isnull=True).order_by("opened_at", "id")[: filters.PAGE_SIZE * 4])
    resolved = incidents.filter(resolved_at__isnull=False)
    if before is not None:
        at, key = before
        resolved = resolved.filter(Q(opened_at__lt=at) | Q(opened_at=at, id__lt=key))
    page = list(resolved.order_by("-opened_at", "-id")[: filters.PAGE_SIZE + 1])
    more = len(page) > filters.PAGE_SIZE
    page = page[: filters.PAGE_SIZE]
    context = {
        "open": open_,
        "resolved": page,
        "next": filters.keyset_value(page[-1].opened_at, page[-1].id) if more else "",
    }
    return render(request, "console/health.html", context)
