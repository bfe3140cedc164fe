"""manage.py capacity and the capacity gauges of /metrics."""

import pytest
from django.core.management import call_command
from django.test import Client

from runs.capacity.live import slots_report
from tests.authority_steps import create_schedule

pytestmark = pytest.mark.django_db


def test_capacity_command__charts_the_day_and_marks_infeasible_minutes(tenant, capsys):
    for n in range(40):
        create_schedule(tenant, cron="0 9 * * *", name=f"nine-{n}")
    for n in range(5):
        create_schedule(tenant, cron="30 9 * * *", name=f"half-{n}")
    slots_report("embedded:test:1", {"short": 10})
    call_command("capacity", "--day", "2030-01-07", "--class", "short")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "capacity forecast for 2030-01-07 (UTC)"
    assert out[1].startswith("short: 10 live slots, 0 busy")
    nine = next(line for line in out if line.strip().startswith("09:00"))
    half = next(line for line in out if line.strip().startswith("09:30"))
    assert " 40 " in nine and "p99 15s" in nine and "INFEASIBLE: needs 14 slots" in nine
    assert " 5 " in half and "p99 0s" in half and "INFEASIBLE" not in half
    assert out[-1].strip() == "slots needed so every minute meets the objective: 14"


def test_capacity_command__bad_day_is_an_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("capacity", "--day", "tomorrow")


def test_metrics__required_slots_for_the_coming_waves(tenant):
    for n in range(20):
        create_schedule(tenant, cron="* * * * *", name=f"minutely-{n}")
    slots_report("embedded:test:1", {"short": 3, "long": 1})
    text = Client().get("/metrics").content.decode()
    assert 'scheduler_live_slots{resource_class="short"} 3.0' in text
    # 20 five-second runs a minute: 99 % of them by 10 s takes three waves of 7.
    assert 'scheduler_required_slots{resource_class="short"} 7.0' in text
    assert 'scheduler_required_slots{resource_class="long"} 0.0' in text


def _required(text: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith('scheduler_required_slots{resource_class="short"}')]
    return float(line.split()[-1])


def test_metrics__required_slots_are_computed_once_per_cache_interval__live_slots_at_every_scrape(tenant, settings):
    settings.CAPACITY_GAUGE_CACHE_SECONDS = 60
    for n in range(20):
        create_schedule(tenant, cron="* * * * *", name=f"minutely-{n}")
    slots_report("embedded:test:1", {"short": 3})
    assert _required(Client().get("/metrics").content.decode()) == 7
    for n in range(20):
        create_schedule(tenant, cron="* * * * *", name=f"more-{n}")
    slots_report("embedded:test:1", {"short": 5})
    text = Client().get("/metrics").content.decode()
    assert 'scheduler_live_slots{resource_class="short"} 5.0' in text
    assert _required(text) == 7  # the cached figure, at most a minute old
    settings.CAPACITY_GAUGE_CACHE_SECONDS = 0
    assert _required(Client().get("/metrics").content.decode()) == 14  # 40 runs a minute: three waves of 14


@pytest.mark.parametrize("cache_seconds, required", [(0, 0), (60, 2)])
def test_metrics__a_cached_figure_covers_the_horizon_plus_the_cache_interval(tenant, settings, cache_seconds,
                                                                          required):
    """A wave 930 s ahead is past the 900 s horizon, but inside it for the whole minute a
    cached figure may be served: computed with the cache on, it counts."""
    from datetime import timedelta

    from kernel.clock import authority_now

    settings.CAPACITY_GAUGE_CACHE_SECONDS = cache_seconds
    at = (authority_now() + timedelta(seconds=930)).isoformat()
    for n in range(4):
        create_schedule(tenant, name=f"once-{n}", recurrence={"kind": "once", "at": at})
    slots_report("embedded:test:1", {"short": 1})
    assert _required(Client().get("/metrics").content.decode()) == required
