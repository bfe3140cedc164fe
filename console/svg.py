"""Server-rendered SVG charts, sized to fit a 1,366-pixel-wide window: the per-minute bar
chart of the next 24 hours with the live slots per class as lines, and the forecast start
lateness p99 per minute. Both have labelled axes with units. Each bar, line and point
carries its minute, class and value as data attributes, so a test (or a person's tooltip)
reads exactly what was drawn. Also the time ticks every time axis of the console uses."""

import math
from datetime import datetime, timedelta, timezone

from django.utils.html import format_html
from django.utils.safestring import mark_safe

from console.words import zone_named

CLASS_COLORS = {"short": "#2b6cb0", "long": "#c05621", "memory": "#6b46c1"}
OTHER_COLOR = "#4a5568"
CHART_HEIGHT = 200
PX_PER_MINUTE = 0.75  # 1,080 px for the day
BAR_WIDTH = 1  # a bar a whole pixel wide (crisp), overlapping the next minute's by a quarter
LEFT = 64  # y tick labels and the y axis title
RIGHT = 16
TOP = 12
BOTTOM = 40  # x tick labels and the x axis title
UTC = timezone.utc


def nice_scale(peak: float, most: int = 5) -> tuple[float, float]:
    """(top, step): the axis ends at a multiple of a 1-2-5 step above `peak`, with at most
    `most` steps; a peak of 0 gets the scale 0 to 1."""
    if peak <= 0:
        return 1.0, 1.0
    raw = peak / most
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if peak >= 1 and step < 1:
        step = 1.0
    return math.ceil(peak / step - 1e-9) * step, step


def _number(value: float) -> str:
    return f"{value:g}"


def forecast_chart(forecast, live_slots: dict[str, int]) -> str:
    """Bars: occurrences due per minute, stacked by class. Lines: each class's live slots now,
    on the same scale (a minute's wave of short runs fits if its bar stays under the line)."""
    totals = forecast.totals()
    live_slots = {rc: n for rc, n in live_slots.items() if n}
    top, step = nice_scale(max(totals + list(live_slots.values())))
    plot_width = len(totals) * PX_PER_MINUTE

    def y(count: float) -> float:
        return TOP + CHART_HEIGHT - count * CHART_HEIGHT / top

    parts = [_value_axis(top, step, y, plot_width, "occurrences due / minute", "")]
    parts += _minute_axis(forecast.start, len(totals), TOP + CHART_HEIGHT)
    base = [0.0] * len(totals)
    for resource_class in sorted(forecast.per_class):
        color = CLASS_COLORS.get(resource_class, OTHER_COLOR)
        for minute, count in enumerate(forecast.per_class[resource_class]):
            if not count:
                continue
            height = count * CHART_HEIGHT / top
            at = forecast.start + timedelta(minutes=minute)
            parts.append(format_html(
                '<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}" shape-rendering="crispEdges" data-minute="{}" '
                'data-class="{}" data-count="{}"><title>{} UTC {}: {} due</title></rect>',
                f"{LEFT + minute * PX_PER_MINUTE:.2f}", f"{TOP + CHART_HEIGHT - base[minute] - height:.3f}",
                BAR_WIDTH, f"{height:.3f}", color, at.strftime("%Y-%m-%dT%H:%MZ"), resource_class, count,
                at.strftime("%H:%M"), resource_class, count,
            ))
            base[minute] += height
    for resource_class, slots in sorted(live_slots.items()):
        line_y = f"{y(slots):.3f}"
        parts.append(format_html(
            '<line class="live-slots" x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2" '
            'stroke-dasharray="6 3" data-class="{}" data-slots="{}"><title>{}: {} live slots</title></line>',
            LEFT, f"{LEFT + plot_width:.2f}", line_y, line_y, CLASS_COLORS.get(resource_class, OTHER_COLOR),
            resource_class, slots, resource_class, slots,
        ))
    return _svg("forecast-chart", LEFT + plot_width + RIGHT, TOP + CHART_HEIGHT + BOTTOM,
                "occurrences due per minute, next 24 hours", parts, top)


LATENESS_HEIGHT = 120
NEVER_BAND = 28  # above the scale: minutes that would never start (no live slots)


def lateness_chart(forecast, capacity) -> str:
    """The forecast p99 start lateness of each minute with occurrences due, a line per class,
    against the objective (dashed). A minute that would never start (no live slots) is drawn
    in a band above the scale, its value `inf`."""
    finite = [v for points in capacity.p99.values() for v in points.values() if not math.isinf(v)]
    top, step = nice_scale(max(finite + [capacity.objective]) * 1.1)
    minutes = len(forecast.totals())
    plot_width = minutes * PX_PER_MINUTE
    scale_top = TOP + NEVER_BAND

    def y(seconds: float) -> float:
        if math.isinf(seconds):
            return TOP + NEVER_BAND / 2
        return scale_top + LATENESS_HEIGHT - min(seconds, top) * LATENESS_HEIGHT / top

    objective_y = f"{y(capacity.objective):.3f}"
    parts = [
        _value_axis(top, step, y, plot_width, "p99 start lateness", " s"),
        format_html('<text x="{}" y="{}" font-size="11" text-anchor="end" dominant-baseline="middle" '
                    'fill="#4a5568">never</text>', LEFT - 6, f"{y(math.inf):.1f}"),
        format_html('<line class="objective" x1="{}" x2="{}" y1="{}" y2="{}" stroke="#e53e3e" '
                    'stroke-dasharray="4 3"/><text x="{}" y="{}" font-size="11" fill="#e53e3e">objective {} s</text>',
                    LEFT, f"{LEFT + plot_width:.2f}", objective_y, objective_y, LEFT + 4,
                    f"{y(capacity.objective) - 3:.3f}", _number(capacity.objective)),
    ]
    parts += _minute_axis(forecast.start, minutes, scale_top + LATENESS_HEIGHT)
    for resource_class, points in sorted(capacity.p99.items()):
        color = CLASS_COLORS.get(resource_class, OTHER_COLOR)
        ordered = sorted(points.items())
        path = " ".join(f"{LEFT + m * PX_PER_MINUTE:.2f},{y(v):.3f}" for m, v in ordered)
        parts.append(format_html('<polyline class="p99-line" points="{}" fill="none" stroke="{}" data-class="{}"/>',
                                 path, color, resource_class))
        for minute, seconds in ordered:
            at = forecast.start + timedelta(minutes=minute)
            parts.append(format_html(
                '<circle class="p99" cx="{}" cy="{}" r="2" fill="{}" data-minute="{}" data-class="{}" '
                'data-p99="{}"><title>{} UTC {}: p99 {} s</title></circle>',
                f"{LEFT + minute * PX_PER_MINUTE:.2f}", f"{y(seconds):.3f}", color, at.strftime("%Y-%m-%dT%H:%MZ"),
                resource_class, f"{seconds:g}", at.strftime("%H:%M"), resource_class, f"{seconds:g}",
            ))
    return _svg("lateness-chart", LEFT + plot_width + RIGHT, scale_top + LATENESS_HEIGHT + BOTTOM,
                "forecast start lateness p99 per minute, next 24 hours", parts, top)


def _svg(chart_id: str, width: float, height: float, label: str, parts: list, top: float) -> str:
    return mark_safe(
        f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" data-peak="{_number(top)}" role="img" aria-label="{label}">'
        f'{"".join(parts)}</svg>'
    )


def _value_axis(top: float, step: float, y, plot_width: float, title: str, unit: str) -> str:
    """Gridlines and labels at each step from 0 to `top`, and the axis title, rotated."""
    parts = []
    ticks = int(round(top / step))
    for index in range(ticks + 1):
        value = index * step
        at = f"{y(value):.3f}"
        parts.append(format_html(
            '<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}"/>'
            '<text class="tick" x="{}" y="{}" font-size="11" text-anchor="end" dominant-baseline="middle">{}{}</text>',
            LEFT, f"{LEFT + plot_width:.2f}", at, at, "#999" if index == 0 else "#edf2f7", LEFT - 6, at,
            _number(round(value, 6)), unit))
    middle = (y(0) + y(top)) / 2
    parts.append(format_html(
        '<text class="axis-title" x="12" y="{0}" font-size="11" text-anchor="middle" fill="#4a5568" '
        'transform="rotate(-90 12 {0})">{1}</text>', f"{middle:.1f}", title))
    return "".join(parts)


def _minute_axis(start: datetime, minutes: int, baseline: float) -> list[str]:
    """Whole hours along the 24 hours (a label every two), in UTC, and the axis title."""
    parts = []
    first = start.replace(minute=0) + timedelta(hours=1) if start.minute else start
    at = first
    while at < start + timedelta(minutes=minutes):
        x = LEFT + (at - start).total_seconds() / 60 * PX_PER_MINUTE
        labelled = at.hour % 2 == 0
        parts.append(format_html('<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#999"/>',
                                 f"{x:.2f}", baseline, baseline + (5 if labelled else 3)))
        if labelled:
            parts.append(format_html('<text class="tick" x="{}" y="{}" font-size="11" text-anchor="middle">{}</text>',
                                     f"{x:.2f}", baseline + 16, at.strftime("%H:%M")))
        at += timedelta(hours=1)
    parts.append(format_html(
        '<text class="axis-title" x="{}" y="{}" font-size="11" text-anchor="middle" fill="#4a5568">'
        'time (UTC), from {} UTC</text>',
        f"{LEFT + minutes * PX_PER_MINUTE / 2:.1f}", baseline + 34, start.strftime("%Y-%m-%d %H:%M")))
    return parts


STEPS = [timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30)] + \
    [timedelta(hours=h) for h in (1, 2, 3, 6, 12)] + [timedelta(days=d) for d in (1, 2, 7, 14, 30, 91, 365)]


def time_ticks(low: datetime, high: datetime, zone_name: str, most: int = 10) -> list[tuple[datetime, str, bool]]:
    """(instant, label, major) at round wall-clock times of `zone_name` between `low` and
    `high`, at most `most` of them; a label shows the date where the day changes."""
    zone = zone_named(zone_name) or UTC
    step = next((s for s in STEPS if (high - low) / s <= most), STEPS[-1])
    local_low = low.astimezone(zone).replace(tzinfo=None)
    months = {timedelta(days=30): 1, timedelta(days=91): 3, timedelta(days=365): 12}.get(step, 0)
    if step < timedelta(days=1):
        midnight = local_low.replace(hour=0, minute=0, second=0, microsecond=0)
        cursor = midnight + ((local_low - midnight) // step + 1) * step
    elif months:  # calendar months and years, from the first of a month
        first = local_low.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        cursor = _add_months(first, months - (first.month - 1) % months)
    else:
        cursor = local_low.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    ticks, last_day = [], None
    while len(ticks) <= most * 2:
        instant = cursor.replace(tzinfo=zone).astimezone(UTC)
        if instant > high:
            break
        if instant >= low and (not ticks or instant > ticks[-1][0]):
            day = cursor.date()
            if months == 12:
                label = cursor.strftime("%Y")
            elif months:
                label = cursor.strftime("%Y-%m")
            elif step >= timedelta(days=1):
                label = cursor.strftime("%Y-%m-%d")
            else:
                label = cursor.strftime("%H:%M") if day == last_day else cursor.strftime("%m-%d %H:%M")
            ticks.append((instant, label, day != last_day or step >= timedelta(days=1)))
            last_day = day
        cursor = _add_months(cursor, months) if months else cursor + step
    return ticks


def _add_months(moment: datetime, months: int) -> datetime:
    """The first of the month `months` after `moment`'s month (`moment` is a month's first)."""
    index = moment.month - 1 + months
    return moment.replace(year=moment.year + index // 12, month=index % 12 + 1)
