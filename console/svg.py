"""Server-rendered SVG: the per-minute bar chart of the next 24 hours with the live slots
per class as lines, the forecast start lateness p99 per minute, and a run timeline. Each
bar, line and point carries its minute, class and value as data attributes, so a test (or a
person's tooltip) reads exactly what was drawn."""

import math
from datetime import timedelta

from django.utils.html import format_html
from django.utils.safestring import mark_safe

CLASS_COLORS = {"short": "#2b6cb0", "long": "#c05621", "memory": "#6b46c1"}
OTHER_COLOR = "#4a5568"
CHART_HEIGHT = 200
BAR_WIDTH = 1  # one pixel per minute: 1440 px for the day
LEFT = 40


def forecast_chart(forecast, live_slots: dict[str, int]) -> str:
    """Bars: occurrences due per minute, stacked by class. Lines: each class's live slots now,
    on the same scale (a minute's wave of short runs fits if its bar stays under the line)."""
    totals = forecast.totals()
    live_slots = {rc: n for rc, n in live_slots.items() if n}
    peak = max(totals + list(live_slots.values())) or 1
    parts = [_axes(forecast, peak, len(totals))]
    base = [0.0] * len(totals)
    for resource_class in sorted(forecast.per_class):
        color = CLASS_COLORS.get(resource_class, OTHER_COLOR)
        for minute, count in enumerate(forecast.per_class[resource_class]):
            if not count:
                continue
            height = count * CHART_HEIGHT / peak
            y = CHART_HEIGHT - base[minute] - height
            at = forecast.start + timedelta(minutes=minute)
            parts.append(format_html(
                '<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}" data-minute="{}" '
                'data-class="{}" data-count="{}"><title>{} UTC {}: {}</title></rect>',
                LEFT + minute * BAR_WIDTH, f"{y:.3f}", BAR_WIDTH, f"{height:.3f}", color, at.strftime("%Y-%m-%dT%H:%MZ"),
                resource_class, count, at.strftime("%H:%M"), resource_class, count,
            ))
            base[minute] += height
    for resource_class, slots in sorted(live_slots.items()):
        y = CHART_HEIGHT - slots * CHART_HEIGHT / peak
        parts.append(format_html(
            '<line class="live-slots" x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2" '
            'stroke-dasharray="6 3" data-class="{}" data-slots="{}"><title>{}: {} live slots</title></line>',
            LEFT, LEFT + len(totals) * BAR_WIDTH, f"{y:.3f}", f"{y:.3f}", CLASS_COLORS.get(resource_class, OTHER_COLOR),
            resource_class, slots, resource_class, slots,
        ))
    width = LEFT + len(totals) * BAR_WIDTH + 10
    return mark_safe(
        f'<svg id="forecast-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{CHART_HEIGHT + 30}" '
        f'data-peak="{peak}" role="img" aria-label="occurrences due per minute">{"".join(parts)}</svg>'
    )


LATENESS_HEIGHT = 120


def lateness_chart(forecast, capacity) -> str:
    """The forecast p99 start lateness of each minute with occurrences due, a line per class,
    against the objective (dashed). A minute that would never start (no live slots) is drawn
    at the top, its value `inf`."""
    finite = [v for points in capacity.p99.values() for v in points.values() if not math.isinf(v)]
    top = max(finite + [capacity.objective]) * 1.1
    minutes = len(forecast.totals())

    def y(seconds: float) -> float:
        return LATENESS_HEIGHT - min(seconds, top) * LATENESS_HEIGHT / top

    objective_y = f"{y(capacity.objective):.3f}"
    parts = [
        f'<line x1="{LEFT}" y1="{LATENESS_HEIGHT}" x2="{LEFT + minutes}" y2="{LATENESS_HEIGHT}" stroke="#999"/>',
        f'<line class="objective" x1="{LEFT}" x2="{LEFT + minutes}" y1="{objective_y}" y2="{objective_y}" '
        f'stroke="#e53e3e" stroke-dasharray="4 3"/>',
        f'<text x="0" y="10" font-size="10">{top:.0f} s</text><text x="{LEFT + 4}" y="{y(capacity.objective) - 3:.3f}" '
        f'font-size="10" fill="#e53e3e">objective {capacity.objective:g} s</text>',
    ]
    for resource_class, points in sorted(capacity.p99.items()):
        color = CLASS_COLORS.get(resource_class, OTHER_COLOR)
        ordered = sorted(points.items())
        path = " ".join(f"{LEFT + m * BAR_WIDTH},{y(v):.3f}" for m, v in ordered)
        parts.append(format_html('<polyline class="p99-line" points="{}" fill="none" stroke="{}" data-class="{}"/>',
                                 path, color, resource_class))
        for minute, seconds in ordered:
            at = forecast.start + timedelta(minutes=minute)
            parts.append(format_html(
                '<circle class="p99" cx="{}" cy="{}" r="2" fill="{}" data-minute="{}" data-class="{}" '
                'data-p99="{}"><title>{} UTC {}: p99 {} s</title></circle>',
                LEFT + minute * BAR_WIDTH, f"{y(seconds):.3f}", color, at.strftime("%Y-%m-%dT%H:%MZ"), resource_class,
                f"{seconds:g}", at.strftime("%H:%M"), resource_class, f"{seconds:g}",
            ))
    return mark_safe(
        f'<svg id="lateness-chart" xmlns="http://www.w3.org/2000/svg" width="{LEFT + minutes + 10}" '
        f'height="{LATENESS_HEIGHT + 10}" role="img" aria-label="forecast start lateness p99 per minute">'
        f'{"".join(parts)}</svg>'
    )


def _axes(forecast, peak: int, minutes: int) -> str:
    labels = [
        format_html('<text x="{}" y="{}" font-size="10">{}</text>', LEFT + m * BAR_WIDTH,
                    CHART_HEIGHT + 14, (forecast.start + timedelta(minutes=m)).strftime("%H:%M"))
        for m in range(0, minutes, 180)
    ]
    return (
        f'<line x1="{LEFT}" y1="{CHART_HEIGHT}" x2="{LEFT + minutes}" y2="{CHART_HEIGHT}" stroke="#999"/>'
        f'<text x="0" y="10" font-size="10">{peak}/min</text><text x="0" y="{CHART_HEIGHT}" font-size="10">0</text>'
        + "".join(labels)
    )


def run_timeline(runs, width: int = 900) -> str:
    """One row per run: a tick at its scheduled instant, a bar from start to finish."""
    moments = [m for run in runs for m in (run.scheduled_at, run.started_at, run.finished_at) if m]
    if not moments:
        return ""
    first, last = min(moments), max(moments)
    span = max((last - first).total_seconds(), 1.0)

    def x(moment) -> str:
        return f"{160 + (moment - first).total_seconds() / span * (width - 170):.1f}"

    rows = []
    for row, run in enumerate(runs):
        y = 10 + row * 16
        rows.append(format_html('<text x="0" y="{}" font-size="10">{} {}</text>', y + 8,
                                run.scheduled_at.strftime("%m-%d %H:%M:%S"), run.state))
        rows.append(format_html('<line class="scheduled" x1="{}" x2="{}" y1="{}" y2="{}" stroke="#000"/>',
                                x(run.scheduled_at), x(run.scheduled_at), y, y + 10))
        if run.started_at:
            end = run.finished_at or last
            rows.append(format_html(
                '<rect class="execution" x="{}" y="{}" width="{}" height="10" fill="{}"/>',
                x(run.started_at), y, f"{max(float(x(end)) - float(x(run.started_at)), 1.0):.1f}",
                "#38a169" if run.state == "succeeded" else "#e53e3e" if run.state == "failed" else "#3182ce",
            ))
    height = 20 + len(runs) * 16
    return mark_safe(f'<svg id="run-timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" '
                     f'height="{height}">{"".join(rows)}</svg>')


