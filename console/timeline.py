"""A schedule's occurrences on one time axis, in the schedule's zone: its recent runs by
state (a mark at the scheduled instant, a bar from start to finish) and its coming instants
as planned, with a line at now; below them its health incidents, a lane per kind, each a bar
over the time it was open (opened to resolved, or to now). Each mark carries its state and
instant as data attributes and a title a person reads on hover; a run's mark links to its
page, an incident's bar to its occurrence's run (else to its row in the page's table)."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from console.svg import time_ticks
from console.words import elapsed, local

WIDTH = 1200
LEFT = 90  # lane names
RIGHT = 16
LANE = 34
TOP = 22  # the "now" label
AXIS = 40  # tick labels and the axis title
MARK = 12

# What each state looks like: fill, outline. Planned: hollow, dashed.
STYLES = {
    "planned": ("#ffffff", "#718096"),
    "pending": ("#e2e8f0", "#718096"),
    "queued": ("#faf089", "#b7791f"),
    "running": ("#3182ce", "#2c5282"),
    "succeeded": ("#38a169", "#276749"),
    "failed": ("#e53e3e", "#9b2c2c"),
    "canceled": ("#a0aec0", "#4a5568"),
    "skipped": ("#ed8936", "#9c4221"),
}
ORDER = ("failed", "skipped", "running", "queued", "pending", "succeeded", "canceled", "planned")
# Each incident kind's lane and colour (fill, outline); an open incident's bar is solid, a
# resolved one's lighter.
INCIDENT_STYLES = {
    "late_start": ("late start", "#dd6b20", "#9c4221"),
    "long_running": ("long running", "#805ad5", "#553c9a"),
    "failures": ("failures", "#c53030", "#742a2a"),
    "forecast": ("forecast", "#d69e2e", "#975a16"),
}
INCIDENT_BAR = 10


@dataclass(frozen=True)
class Mark:
    at: datetime
    state: str
    lane: str
    title: str
    href: str = ""
    started: datetime | None = None
    finished: datetime | None = None


def marks(runs, coming: list[datetime], zone: str, now: datetime) -> list[Mark]:
    """The runs (any order) and the coming instants no run holds yet, as marks."""
    found = []
    for run in runs:
        found.append(Mark(run.scheduled_at, run.state, "run now" if run.trigger == "manual" else "scheduled",
                          _title(run, zone), reverse("console:run", args=[run.id]), run.started_at,
                          run.finished_at))
    taken = {run.scheduled_at for run in runs if run.trigger == "schedule"}
    for at in coming:
        if at not in taken:
            shown, abbreviation = local(at, zone)
            found.append(Mark(at, "planned", "scheduled", f"{shown} {abbreviation}: planned"))
    return found


@dataclass(frozen=True)
class Span:
    """An incident over the time it was open: `until` is None while it is open."""

    kind: str
    since: datetime
    until: datetime | None
    title: str
    href: str
    incident_id: str


def spans(incidents, zone: str) -> list[Span]:
    """The schedule's incidents (any order) as bars on its axis."""
    found = []
    for incident in incidents:
        since, abbreviation = local(incident.opened_at, zone)
        parts = [f"{incident.kind} since {since} {abbreviation}"]
        if incident.resolved_at is not None:
            until, until_abbreviation = local(incident.resolved_at, zone)
            parts.append(f"resolved {until} {until_abbreviation}" + (
                f" ({incident.resolution})" if incident.resolution else ""))
        else:
            parts.append("open")
        if incident.instant is not None:
            at, at_abbreviation = local(incident.instant, zone)
            parts.append(f"occurrence {at} {at_abbreviation}")
        if incident.run_id:
            parts.append(f"run {incident.run_id}")
        parts.append(incident.id)
        href = reverse("console:run", args=[incident.run_id]) if incident.run_id else f"#incident-{incident.id}"
        found.append(Span(incident.kind, incident.opened_at, incident.resolved_at, " · ".join(parts), href,
                          incident.id))
    return found


def _title(run, zone: str) -> str:
    shown, abbreviation = local(run.scheduled_at, zone)
    parts = [f"{shown} {abbreviation}: {run.state}"]
    if run.state == "skipped" and run.skip_reason:
        parts.append(f"skipped ({run.skip_reason})" + (f", {run.skipped_count} instants" if run.skipped_count else ""))
    if run.started_at:
        parts.append(f"started {elapsed(max(0.0, (run.started_at - run.scheduled_at).total_seconds()))} after")
    if run.started_at and run.finished_at:
        parts.append(f"ran {elapsed(max(0.0, (run.finished_at - run.started_at).total_seconds()))}")
    if run.error:
        parts.append(run.error[:120])
    return " · ".join(parts)


def counts(found: list[Mark]) -> list[tuple[str, int, str, str]]:
    """(state, count, fill, outline) for the legend, in ORDER, states present only."""
    tally: dict[str, int] = {}
    for mark in found:
        tally[mark.state] = tally.get(mark.state, 0) + 1
    return [(state, tally[state], *STYLES[state]) for state in ORDER if state in tally]


def occurrence_axis(found: list[Mark], zone: str, now: datetime, incidents: list[Span] = ()) -> str:
    """The axis spans the marks and now; an incident drawn widens it to its whole open time.
    Drawn: every incident open at some moment of the marks' span (all the open ones), so an
    incident resolved before the oldest run shown does not squeeze the runs (the page's
    table lists it)."""
    oldest = min([now] + [mark.at for mark in found])
    incidents = [bar for bar in incidents if bar.until is None or bar.until >= oldest]
    if not found and not incidents:
        return ""
    moments = [now] + [m for mark in found for m in (mark.at, mark.started, mark.finished) if m]
    moments += [m for bar in incidents for m in (bar.since, bar.until) if m]
    low, high = min(moments), max(moments)
    pad = max((high - low) * 0.03, timedelta(seconds=30))
    low, high = low - pad, high + pad
    span = (high - low).total_seconds()
    plot = WIDTH - LEFT - RIGHT

    def x(moment: datetime) -> float:
        return LEFT + (moment - low).total_seconds() / span * plot

    lanes = [lane for lane in ("scheduled", "run now") if any(mark.lane == lane for mark in found)]
    lanes += [INCIDENT_STYLES[kind][0] for kind in INCIDENT_STYLES if any(bar.kind == kind for bar in incidents)]
    bottom = TOP + LANE * len(lanes)
    parts = []
    for index, lane in enumerate(lanes):
        middle = TOP + LANE * index + LANE / 2
        parts.append(format_html(
            '<text x="0" y="{}" font-size="12" dominant-baseline="middle">{}</text>'
            '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#edf2f7"/>',
            f"{middle:.1f}", lane, LEFT, WIDTH - RIGHT, f"{middle:.1f}", f"{middle:.1f}"))
    for at, label, major in time_ticks(low, high, zone):
        parts.append(format_html(
            '<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="{3}"/>'
            '<text x="{0}" y="{4}" font-size="11" text-anchor="middle" fill="#4a5568">{5}</text>',
            f"{x(at):.1f}", TOP, bottom + 4, "#cbd5e0" if major else "#edf2f7", bottom + 16, label))
    now_x = f"{x(now):.1f}"
    parts.append(format_html(
        '<line id="now-line" x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#1a202c" stroke-dasharray="3 2"/>'
        '<text x="{0}" y="{3}" font-size="11" text-anchor="middle" font-weight="bold">now</text>',
        now_x, TOP - 4, bottom, TOP - 8))
    for mark in sorted(found, key=lambda m: m.at):
        parts.append(_mark(mark, x, TOP + LANE * lanes.index(mark.lane) + LANE / 2, now))
    for bar in sorted(incidents, key=lambda b: b.since):
        parts.append(_incident(bar, x, TOP + LANE * lanes.index(INCIDENT_STYLES[bar.kind][0]) + LANE / 2, now))
    parts.append(format_html(
        '<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="#4a5568">time in {} '
        '(mark: scheduled instant; bar under it: started to finished; incident bar: opened to resolved)</text>',
        LEFT + plot / 2, bottom + AXIS - 6, zone))
    height = bottom + AXIS
    return mark_safe(
        f'<svg id="occurrence-axis" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="recent and coming occurrences">'
        f'{"".join(parts)}</svg>'
    )


def _mark(mark: Mark, x, middle: float, now: datetime) -> str:
    fill, outline = STYLES[mark.state]
    cx, half = x(mark.at), MARK / 2
    at = _utc(mark.at)
    if mark.state == "skipped":  # a diamond: nothing ran
        shape = format_html(
            '<polygon class="occurrence" points="{},{} {},{} {},{} {},{}" fill="{}" stroke="{}" '
            'data-state="{}" data-at="{}"><title>{}</title></polygon>',
            f"{cx:.1f}", f"{middle - half - 1:.1f}", f"{cx + half + 1:.1f}", f"{middle:.1f}", f"{cx:.1f}",
            f"{middle + half + 1:.1f}", f"{cx - half - 1:.1f}", f"{middle:.1f}", fill, outline, mark.state, at,
            mark.title)
    else:
        shape = format_html(
            '<rect class="occurrence" x="{}" y="{}" width="{}" height="{}" rx="2" fill="{}" stroke="{}"{} '
            'data-state="{}" data-at="{}"><title>{}</title></rect>',
            f"{cx - half:.1f}", f"{middle - half - 4:.1f}", MARK, MARK, fill, outline,
            mark_safe(' stroke-dasharray="3 2"') if mark.state == "planned" else "", mark.state, at, mark.title)
    if mark.started is not None:
        end = mark.finished or now
        start_x = x(mark.started)
        shape += format_html(
            '<rect class="execution" x="{}" y="{}" width="{}" height="4" fill="{}" data-state="{}"/>',
            f"{start_x:.1f}", f"{middle + half - 2:.1f}", f"{max(x(end) - start_x, 2.0):.1f}", outline, mark.state)
    if mark.href:
        return format_html('<a href="{}">{}</a>', mark.href, shape)
    return shape


def _incident(span: Span, x, middle: float, now: datetime) -> str:
    _, fill, outline = INCIDENT_STYLES[span.kind]
    start_x = x(span.since)
    end_x = x(span.until or now)
    shape = format_html(
        '<rect class="incident" x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="{}" stroke="{}" '
        'data-kind="{}" data-opened="{}" data-resolved="{}" data-incident="{}"><title>{}</title></rect>',
        f"{start_x:.1f}", f"{middle - INCIDENT_BAR / 2:.1f}", f"{max(end_x - start_x, 2.0):.1f}", INCIDENT_BAR, fill,
        "0.45" if span.until else "1", outline, span.kind, _utc(span.since), _utc(span.until) if span.until else "",
        span.incident_id, span.title)
    return format_html('<a href="{}">{}</a>', span.href, shape)


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
