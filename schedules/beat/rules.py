"""A django-celery-beat PeriodicTask's schedule as one of ours, keeping beat's meaning, or the
reason it cannot be one.

- crontab: the same fields in the crontab's own time zone. Beat runs on a day only when the
  day-of-month AND the day-of-week match. When one of the two admits every day the rule is
  rewritten with ``*`` there (every dialect then agrees, and it stays the default, vixie);
  when both are restricted the rule is imported under the dialect ``and``, beat's meaning.
  Fields are expanded by Celery's own parser and written back as plain lists and ranges, so
  beat's syntax and ours never have to agree.
- interval: ``everySeconds`` anchored where beat would fire next (its last run plus the
  period, not before ``start_time``, not before now).
- clocked (always one-off) and any other one-off row: a ``once`` rule at beat's next instant.
- solar: refused (sunrise and sunset move every day; no rule here follows them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from schedules.beat.instants import beat_cron_instants
from schedules.recurrence import MAX_SECONDS, RecurrenceError, Rule, parse_rule
from schedules.recurrence.cron import value_ranges

UTC = timezone.utc
PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
MAX_GRACE_SECONDS = 7 * 86400
SOLAR_REFUSAL = ("solar schedules (an event such as sunrise at a latitude and longitude) move every day; "
                 "no rule here follows them. Use a cron rule at a fixed local time instead")


@dataclass(frozen=True)
class Translation:
    beat_rule: str  # beat's rule as text, for the table
    rule: Rule | None = None  # ours; None when refused
    refusal: str = ""
    notes: tuple[str, ...] = ()
    day_rule: str = ""  # "", "rewritten" or "and": rows the AND/OR difference touched
    misfire: dict = field(default_factory=dict)  # ScheduleSpec misfire fields


def translate(task, now: datetime) -> Translation:
    """The PeriodicTask ``task``'s schedule as ours, its instants taken after ``now``."""
    if task.crontab_id:
        translation = _from_crontab(task, now)
    elif task.interval_id:
        translation = _from_interval(task, now)
    elif task.clocked_id:
        translation = _from_clocked(task, now)
    elif task.solar_id:
        return Translation(beat_rule=f"solar {task.solar.event} at {task.solar.latitude},{task.solar.longitude}",
                           refusal=SOLAR_REFUSAL)
    else:
        return Translation(beat_rule="(no schedule)", refusal="the row has no schedule")
    refusal = translation.refusal or _expiry_refusal(task, now)
    if refusal:
        return Translation(beat_rule=translation.beat_rule, refusal=refusal, day_rule=translation.day_rule,
                           notes=translation.notes)
    if task.expire_seconds:
        grace = min(task.expire_seconds, MAX_GRACE_SECONDS)
        translation = _with(translation, misfire={"misfire_policy": "skip", "misfire_grace_seconds": grace},
                            note=f"expire_seconds {task.expire_seconds}: an occurrence more than {grace}s late "
                                 f"is skipped (misfirePolicy skip)")
    return translation


def _expiry_refusal(task, now: datetime) -> str:
    if task.expires is None:
        return ""
    if task.expires <= now:
        return f"expired at {_iso(task.expires)}: beat no longer runs it"
    return f"expires at {_iso(task.expires)}: schedules here have no end date"


def _with(translation: Translation, *, note: str, **changes) -> Translation:
    fields = {**translation.__dict__, **changes, "notes": translation.notes + (note,)}
    return Translation(**fields)


def _from_crontab(task, now: datetime) -> Translation:
    from celery.schedules import crontab

    c = task.crontab
    zone = str(c.timezone)
    beat_rule = f"crontab {_text(c.minute)} {_text(c.hour)} {_text(c.day_of_month)} " \
                f"{_text(c.month_of_year)} {_text(c.day_of_week)} {zone}"
    try:
        parsed = crontab(minute=c.minute, hour=c.hour, day_of_week=c.day_of_week, day_of_month=c.day_of_month,
                         month_of_year=c.month_of_year)
    except ValueError as exc:
        return Translation(beat_rule=beat_rule, refusal=f"Celery cannot parse the crontab: {exc}")
    days, weekdays = set(parsed.day_of_month), set(parsed.day_of_week)
    day_rule, notes = _day_rule(c, days, weekdays)
    expression = " ".join((_cron_field(parsed.minute, range(60)), _cron_field(parsed.hour, range(24)),
                           _cron_field(days, range(1, 32)), _cron_field(parsed.month_of_year, range(1, 13)),
                           _cron_field(weekdays, range(7))))
    try:
        rule = parse_rule({"kind": "cron", "cron": expression, "timezone": zone,
                           "dialect": "and" if day_rule == "and" else "vixie"})
    except RecurrenceError as exc:
        return Translation(beat_rule=beat_rule, day_rule=day_rule, refusal=f"no equivalent rule here: {exc.message}")
    if task.start_time is not None and task.start_time > now:
        return Translation(beat_rule=beat_rule, day_rule=day_rule, notes=tuple(notes),
                           refusal=f"starts at {_iso(task.start_time)}: a cron schedule here starts when it is "
                                   f"created; import the row after that time")
    translation = Translation(beat_rule=beat_rule, rule=rule, day_rule=day_rule, notes=tuple(notes))
    if task.one_off:
        return _once(translation, beat_cron_instants(c.schedule, now, 1), zone)
    return translation


def _day_rule(c, days: set, weekdays: set) -> tuple[str, list[str]]:
    """How beat's AND of the two day fields carries over: ("", "rewritten" or "and", notes)."""
    if days != set(range(1, 32)) and weekdays != set(range(7)):
        return "and", [
            f"beat runs only on days matching day-of-month {_text(c.day_of_month)} AND day-of-week "
            f"{_text(c.day_of_week)}: imported under dialect 'and', which means the same"
        ]
    literal_both = _text(c.day_of_month) != "*" and _text(c.day_of_week) != "*"
    if literal_both:  # one of them spells out every day: Vixie would read it as a restriction
        which = "day-of-month" if days == set(range(1, 32)) else "day-of-week"
        return "rewritten", [f"{which} admits every day: written as '*' so the other day field alone decides, "
                             f"as in beat (beat ANDs the day fields, a cron rule here ORs them)"]
    return "", []


def _from_interval(task, now: datetime) -> Translation:
    period = task.interval.period
    if period == "microseconds":
        seconds = task.interval.every / 1_000_000
    else:
        seconds = task.interval.every * PERIOD_SECONDS.get(period, 0)
    beat_rule = f"every {task.interval.every} {period}"
    if seconds != int(seconds) or not 1 <= seconds <= MAX_SECONDS:
        return Translation(beat_rule=beat_rule,
                           refusal=f"an interval here is a whole number of seconds from 1 to {MAX_SECONDS}")
    seconds = int(seconds)
    last = task.last_run_at or task.date_changed or now
    first = last + timedelta(seconds=seconds)
    if task.start_time is not None and first < task.start_time:
        first = task.start_time
    # Overdue: beat fires at its next tick, i.e. now; so does ours, and the cadence runs on from there.
    first = max(first, _whole_second_after(now)).astimezone(UTC)
    rule = parse_rule({"kind": "interval", "everySeconds": seconds, "anchor": _iso(first), "timezone": "UTC"})
    translation = Translation(beat_rule=beat_rule, rule=rule,
                              notes=("elapsed time: beat runs each one a tick late and drifts; ours keeps the "
                                     "anchor",))
    if task.one_off:
        return _once(translation, [first], "UTC")
    return translation


def _from_clocked(task, now: datetime) -> Translation:
    at = task.clocked.clocked_time
    beat_rule = f"clocked {_iso(at)}"
    if at <= now:
        return Translation(beat_rule=beat_rule,
                           refusal=f"its time {_iso(at)} has passed: beat runs it at its next start if it has not "
                                   f"run yet; run it by hand (POST /schedules/{{id}}/runs) if it should")
    return Translation(beat_rule=beat_rule, rule=parse_rule({"kind": "once", "at": _iso(at), "timezone": "UTC"}))


def _once(translation: Translation, instants: list[datetime], zone: str) -> Translation:
    """A one-off row: beat runs its next instant, then disables the row."""
    if not instants:
        return Translation(beat_rule=translation.beat_rule, refusal="one-off, and its rule has no next instant")
    rule = parse_rule({"kind": "once", "at": _iso(instants[0]), "timezone": zone})
    return _with(translation, rule=rule, note="one-off: beat runs the next instant once, then disables the row")


def _cron_field(values, every: range) -> str:
    values = sorted(set(values))
    if values == list(every):
        return "*"
    return ",".join(value_ranges(values))


def _text(field: str) -> str:
    return str(field).replace(" ", "") or "*"


def _whole_second_after(instant: datetime) -> datetime:
    return datetime.fromtimestamp(math.floor(instant.timestamp()) + 1, tz=UTC)


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rule_text(rule: Rule) -> str:
    """Ours, as the table shows it."""
    if rule.kind == "cron":
        return f"cron {rule.cron} {rule.timezone} dialect {rule.dialect}"
    if rule.kind == "interval":
        return f"interval {rule.every_seconds}s from {_iso(rule.anchor)}"
    if rule.kind == "once":
        return f"once {_iso(rule.at)}"
    return f"after_completion {rule.delay_seconds}s"
