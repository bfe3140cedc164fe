"""What beat would fire, computed by the installed Celery's own crontab code, and where that
differs from our rule around the time zone's DST transitions.

Beat fires a crontab entry when ``remaining_estimate(last_run_at)`` reaches zero and then
takes the firing time as ``last_run_at``; so after a firing at ``L`` the next one is at
``L + remaining_estimate(L)`` in real time. That walk, started at an instant, is beat's
sequence of firings (give or take its tick of a few seconds).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from schedules import recurrence

UTC = timezone.utc
HORIZON = timedelta(days=366)  # transitions looked at: the coming year
WINDOW = timedelta(hours=30)  # each side of a transition: its whole local day, either offset
MAX_WALK = 5000  # instants per window (a per-minute rule has 3,600 in one)
SHOWN_TIMES = 6


def beat_cron_instants(schedule, after: datetime, count: int, until: datetime | None = None) -> list[datetime]:
    """Beat's next firings of the crontab ``schedule`` (a CrontabSchedule's ``.schedule``) after ``after``."""
    from celery.utils.time import remaining

    instants: list[datetime] = []
    last = after
    while len(instants) < count:
        start, ends_in, now = schedule.remaining_delta(last)
        # `now` is aware in the crontab's zone: add the remainder in UTC, or wall-clock arithmetic applies.
        instant = now.astimezone(UTC) + remaining(start, ends_in, now)
        if until is not None and instant > until:
            break
        if instant <= last:  # Celery never goes back; guard against a loop all the same
            break
        instants.append(instant)
        last = instant
    return instants


def transitions(zone_name: str, after: datetime, horizon: timedelta = HORIZON) -> list[tuple[datetime, bool]]:
    """(instant, clocks go forward) of every UTC-offset change in ``zone_name`` within the horizon, to the hour."""
    zone = ZoneInfo(zone_name)
    found = []
    cursor = after.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    offset = cursor.astimezone(zone).utcoffset()
    for _ in range(int(horizon / timedelta(hours=1))):
        cursor += timedelta(hours=1)
        current = cursor.astimezone(zone).utcoffset()
        if current != offset:
            found.append((cursor, current > offset))
            offset = current
    return found


def dst_notes(schedule, rule: recurrence.Rule, after: datetime) -> list[str]:
    """One line per transition in the coming year where beat and ``rule`` fire differently."""
    zone = ZoneInfo(rule.timezone)
    notes = []
    for instant, forward in transitions(rule.timezone, after):
        start, end = max(after, instant - WINDOW), instant + WINDOW
        beat = set(beat_cron_instants(schedule, start, MAX_WALK, until=end))
        ours = set(recurrence.instants_between(rule, start, end, MAX_WALK))
        if beat != ours:
            notes.append(_describe(instant, forward, beat, ours, zone))
    return notes


def _describe(instant: datetime, forward: bool, beat: set, ours: set, zone: ZoneInfo) -> str:
    """The local days around the transition where the two differ: how often each fires, and when."""
    by_day: dict[date, list[set]] = defaultdict(lambda: [set(), set()])
    for index, instants in enumerate((beat, ours)):
        for at in instants:
            by_day[at.astimezone(zone).date()][index].add(at)
    parts = []
    for day, (beat_day, ours_day) in sorted(by_day.items()):
        if beat_day == ours_day:
            continue
        detail = [f"on {day} beat fires {len(beat_day)}x, ours {len(ours_day)}x"]
        if beat_day - ours_day:
            detail.append(f"only beat {_local_times(beat_day - ours_day, zone)}")
        if ours_day - beat_day:
            detail.append(f"only ours {_local_times(ours_day - beat_day, zone)}")
        parts.append("; ".join(detail))
    change = "forward" if forward else "back"
    return f"DST transition {instant.astimezone(zone).date()} (clocks go {change}): " + " | ".join(parts)


def _local_times(instants: set, zone: ZoneInfo) -> str:
    shown = sorted(instants)[:SHOWN_TIMES]
    text = ", ".join(at.astimezone(zone).strftime("%H:%M %Z") for at in shown)
    return text + (", ..." if len(instants) > SHOWN_TIMES else "")
