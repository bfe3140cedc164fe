"""manage.py capacity [--day 2027-03-15] [--class short]: a day's forecast as a terminal chart."""

from datetime import date, datetime, timedelta, timezone

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.capacity.forecast import ForecastTooLarge, forecast

BAR_WIDTH = 40


def chart_lines(result, rc: str) -> list[str]:
    """One line per minute with occurrences due: its count as a bar, the predicted p50/p99,
    and the infeasible ones marked with the slots their wave alone needs."""
    rows = [r for r in result.rows if r.resource_class == rc]
    capacity = result.capacity.get(rc, {})
    lines = [f"{rc}: {capacity.get('liveSlots', 0)} live slots, {capacity.get('busySlots', 0)} busy; "
             f"objective: start within {result.objective:g} s at p99"]
    if not rows:
        return lines + ["  no occurrences due"]
    widest = max(r.due for r in rows)
    for r in rows:
        p50, p99 = r.p(50), r.p(99)
        bar = "#" * max(1, round(BAR_WIDTH * r.due / widest))
        late = f"p50 {_seconds(p50)} p99 {_seconds(p99)}"
        mark = "" if p99 is not None and p99 <= result.objective else f"  INFEASIBLE: needs {r.slots_needed} slots"
        lines.append(f"  {r.minute:%H:%M} {r.due:>8} {bar:<{BAR_WIDTH}} {late}{mark}")
    lines.append(f"  slots needed so every minute meets the objective: {result.required.get(rc, 0)}")
    return lines


def _seconds(value) -> str:
    return "never" if value is None or value == float("inf") else f"{value:g}s"


class Command(BaseCommand):
    help = "Forecast a day's waves per resource class: due counts, predicted start lateness, slots needed."

    def add_arguments(self, parser):
        parser.add_argument("--day", help="UTC day, YYYY-MM-DD (default: today)")
        parser.add_argument("--class", dest="resource_class", choices=settings.RESOURCE_CLASSES)
        parser.add_argument("--budget", type=int, default=None,
                            help="work the forecast may do (default CAPACITY_FORECAST_BUDGET); a day of dense "
                                 "schedules may need more")

    def handle(self, *args, day=None, resource_class=None, budget=None, **options):
        try:
            day = date.fromisoformat(day) if day else datetime.now(timezone.utc).date()
        except ValueError:
            raise CommandError("--day looks like 2027-03-15") from None
        start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
        classes = [resource_class] if resource_class else list(settings.RESOURCE_CLASSES)
        try:
            result = forecast(start, start + timedelta(days=1), classes=classes, budget=budget)
        except ForecastTooLarge:
            raise CommandError(f"the schedules due that day make more occurrences than the budget "
                               f"({budget or settings.CAPACITY_FORECAST_BUDGET}) simulates; pass a larger --budget") from None
        self.stdout.write(f"capacity forecast for {day} (UTC)")
        for rc in classes:
            self.stdout.write("\n".join(chart_lines(result, rc)))
