"""Console pages: Overview, Next 24 hours and the uncertain effects queue. Schedules and
runs are in schedule_views and run_views. Every state change calls a service."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.db.models import Q
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console import filters
from console.access import act, actor, staff_only
from console.attention import failing_now, job_types_unavailable, late_now
from console.forecast import HORIZON, next_24_hours
from console.overview import health, lateness_by_tenant_and_class, state_counts
from console.svg import CLASS_COLORS, forecast_chart, lateness_chart
from effects.delivery import effect_resolve
from kernel.clock import authority_now
from runs.models import EffectIntent, EffectState


class ConsoleLoginView(LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = False


@staff_only
def overview(request):
    now = authority_now()
    lateness = lateness_by_tenant_and_class(now)
    context = {
        "now": now,
        "late": late_now(now),
        "failing": failing_now(now),
        "unavailable": job_types_unavailable(),
        "breaches": [row for row in lateness if row.breach],
        "counts": state_counts(now),
        "lateness": lateness,
        "objective": settings.CONSOLE_START_OBJECTIVE_SECONDS,
        "health": health(now),
    }
    return render(request, "console/overview.html", context)


@staff_only
def next_day(request):
    forecast = next_24_hours(authority_now())
    capacity = forecast.capacity
    totals = forecast.totals()
    busiest = sorted((-count, minute) for minute, count in enumerate(totals) if count)[:10]
    context = {
        "forecast": forecast,
        "capacity": capacity,
        "chart": forecast_chart(forecast, capacity.live_slots),
        "lateness_chart": lateness_chart(forecast, capacity),
        "colors": [(name, CLASS_COLORS.get(name, "#4a5568"), sum(counts)) for name, counts in sorted(forecast.per_class.items())],
        "busiest": [(forecast.start + timedelta(minutes=minute), -count) for count, minute in busiest],
        "total": forecast.total(),
        "full_horizon": HORIZON,
    }
    return render(request, "console/next_day.html", context)


@staff_only
def uncertain_effects(request):
    after = filters.keyset(request.GET, "after")
    intents = EffectIntent.objects.filter(state=EffectState.UNCERTAIN).select_related("run__schedule")
    if after is not None:
        intents = intents.filter(Q(created_at__gt=after[0]) | Q(created_at=after[0], id__gt=after[1]))
    page = list(intents.order_by("created_at", "id")[: filters.PAGE_SIZE + 1])
    more = len(page) > filters.PAGE_SIZE
    page = page[: filters.PAGE_SIZE]
    context = {
        "intents": page,
        "next": filters.keyset_value(page[-1].created_at, page[-1].id) if more else "",
    }
    return render(request, "console/effects.html", context)


@require_POST
@staff_only
def resolve_effect(request, effect_id):
    resolution = filters.choice(request.POST, "resolution", ("sent", "failed", "retry"))
    intent = EffectIntent.objects.filter(id=effect_id).first()
    back = reverse("console:effects")
    if intent is None or not resolution:
        return act(request, _missing, "", back)
    return act(
        request, lambda: effect_resolve(action=intent.action, resolution=resolution, actor=actor(request)),
        f"{intent.action}: {resolution} (by {request.user.get_username()})", back,
    )


def _missing():
    from kernel.errors import NotFound

    raise NotFound("no such effect, or no resolution chosen")
