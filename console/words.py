"""What a rule and an instant read like on the console's pages: a rule in words ("every 5
minutes (UTC)", "at 09:00 on Mon-Fri (America/New_York)") next to its own syntax, and an
instant on the wall clock of the schedule's zone with the zone named.

A cron rule is described from its expanded value sets, not from its text: `*/5`,
`0-59/5` and an imported `0,5,10,...,55` are the same set, so they read the same."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from schedules.recurrence import RecurrenceError, parse_rule
from schedules.recurrence.cron import DEFAULT_DIALECT, compile_cron, value_ranges

DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
MONTHS = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
LISTED = 6  # at most this many times of day are listed one by one


def zone_of(recurrence) -> str:
    """The zone a schedule's instants are shown in: its rule's (UTC when the rule names none)."""
    zone = recurrence.get("timezone") if isinstance(recurrence, dict) else None
    return zone if isinstance(zone, str) and zone_named(zone) is not None else "UTC"


def local(instant: datetime, zone_name: str) -> tuple[str, str]:
    """(`2026-12-07 09:00:00`, `EST`): `instant` on the wall clock of `zone_name` and the
    zone's abbreviation then; UTC for a zone this host does not know."""
    zone = zone_named(zone_name) or timezone.utc
    try:
        moment = instant.astimezone(zone)
    except (OverflowError, ValueError):
        moment = instant.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S"), moment.tzname() or zone_name


def zone_named(name: str):
    """The ZoneInfo of `name`, or None when this host does not know it."""
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def rule_in_words(recurrence: dict, calendar: dict | None = None, names: dict | None = None) -> str:
    """The rule in words, then what its schedule's `calendar` does ("; skipping US bank
    holidays"); `names` maps calendar ids to their names (an id stands for a missing one)."""
    words = _rule_in_words(recurrence, names or {})
    ids = (calendar or {}).get("calendarIds") if isinstance(calendar, dict) else None
    if ids:
        policy = calendar.get("policy") or "skip"
        doing = {"skip": "skipping", "shift_before": "moved to the business day before on",
                 "shift_after": "moved to the business day after on"}.get(policy, policy)
        words += f"; {doing} {calendar_names(ids, names or {})}"
    return words


def calendar_names(ids, names: dict) -> str:
    return ", ".join(names.get(calendar_id, calendar_id) for calendar_id in ids)


def _rule_in_words(recurrence: dict, names: dict) -> str:
    try:
        rule = parse_rule(recurrence, anchor_required=False)
    except (RecurrenceError, TypeError, ValueError):
        return "unreadable rule"
    zone = f" ({rule.timezone})"
    if rule.kind == "business_day":
        words = f"at {rule.at_time:%H:%M} on the {business_days_in_words(rule.days)} of each month{zone}"
        return words + (f", except {calendar_names(rule.business_ids, names)}" if rule.business_ids else "")
    if rule.kind == "interval":
        return f"every {duration(rule.every_seconds)}"
    if rule.kind == "once":
        at, abbreviation = local(rule.at, rule.timezone)
        return f"once, at {at} {abbreviation}"
    if rule.kind == "after_completion":
        return f"{duration(rule.delay_seconds)} after the previous run ends"
    if rule.kind == "rrule":
        return rrule_in_words(rule) + zone
    return cron_in_words(rule.cron, rule.dialect, rule.hash_key) + zone


def business_days_in_words(days) -> str:
    """`first and last business day`, `3rd business day`, `2nd-to-last business day`."""
    words = [_ordinal(n) for n in days if n > 0] + [_ordinal(n) for n in sorted((n for n in days if n < 0),
                                                                              reverse=True)]
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"{listed} business day" + ("s" if len(words) > 1 else "")


def _ordinal(n: int) -> str:
    named = {1: "first", 2: "second", 3: "third"}
    if n == -1:
        return "last"
    if n < 0:
        return f"{_ordinal(-n)}-to-last"
    return named.get(n) or f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def rrule_in_words(rule) -> str:
    """`RRULE FREQ=MONTHLY;BYDAY=-1FR from 2027-01-01 00:00:00, except 1 date, plus 2`: the
    rule's own text (RFC 5545 reads better than a paraphrase of it) on the zone's wall clock."""
    fields = rule.rrule
    words = f"RRULE {fields.text} from {fields.dtstart:%Y-%m-%d %H:%M:%S}"
    if fields.exdates:
        words += f", except {len(fields.exdates)} date" + ("s" if len(fields.exdates) != 1 else "")
    if fields.rdates:
        words += f", plus {len(fields.rdates)} date" + ("s" if len(fields.rdates) != 1 else "")
    return words


def rule_syntax(recurrence: dict) -> str:
    """The rule as written: the cron expression itself (its dialect named unless the default),
    or the fields of another kind."""
    if not isinstance(recurrence, dict):
        return "-"
    if recurrence.get("kind") == "cron":
        dialect = recurrence.get("dialect", DEFAULT_DIALECT)
        return f"cron {recurrence.get('cron')}" + (f" (dialect {dialect})" if dialect != DEFAULT_DIALECT else "")
    if recurrence.get("kind") == "rrule":
        return f"RRULE:{recurrence.get('rrule')} DTSTART:{recurrence.get('dtstart')}"
    fields = " ".join(f"{key}={value}" for key, value in recurrence.items() if key not in ("kind", "timezone"))
    return f"{recurrence.get('kind')} {fields}".strip()


def duration(seconds: float) -> str:
    """`5 minutes`, `hour`, `90 seconds`: a whole unit when it divides, else seconds."""
    seconds = int(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}s" if count != 1 else unit
    return f"{seconds} seconds" if seconds != 1 else "second"


def cron_in_words(cron: str, dialect: str = DEFAULT_DIALECT, hash_key: str | None = None) -> str:
    """The rule's values as compiled (H resolved with `hash_key`, the schedule's id), the day
    fields combined as its dialect combines them."""
    try:
        spec = compile_cron(cron, dialect, hash_key)
    except (RecurrenceError, ValueError):
        return f"cron {cron}"
    minutes, hours = list(spec.minutes), list(spec.hours)
    when, repeating = _time_of_day(minutes, hours)
    if spec.seconds != (0,):
        when, repeating = _with_seconds(list(spec.seconds), minutes, hours, when)
    days = _days(spec)
    months = "" if len(spec.months) == 12 else " in " + _listed([MONTHS[m] for m in spec.months], spec.months)
    if not days and not months:
        return when if repeating else f"{when} every day"
    return f"{when}{days}{months}"


def _time_of_day(minutes: list[int], hours: list[int]) -> tuple[str, bool]:
    """The time-of-day part, and whether it already repeats within the day."""
    every_hour = len(hours) == 24
    hour_span = "" if every_hour else _hour_span(hours, minutes)
    if len(minutes) == 60:
        return ("every minute" + hour_span), True
    if len(minutes) * len(hours) <= LISTED:
        times = [f"{h:02d}:{m:02d}" for h in hours for m in minutes]
        return "at " + _and(times), False
    step = _step(minutes, 60)
    if step and (every_hour or hour_span):
        start = f" from :{minutes[0]:02d}" if minutes[0] and not hour_span else ""
        return f"every {step} minutes{start}{hour_span}", True
    if len(minutes) == 1:
        hour_step = _step(hours, 24)
        if every_hour:
            return f"every hour at :{minutes[0]:02d}", True
        if hour_span:
            return f"every hour{hour_span}", True
        if hour_step:
            return f"every {hour_step} hours from {hours[0]:02d}:{minutes[0]:02d}", True
        return f"at :{minutes[0]:02d} past hours {_ranges(hours)}", True
    past = "every hour" if every_hour else f"hours {_ranges(hours)}"
    return f"at minutes {_ranges(minutes)} past {past}", True


def _with_seconds(seconds: list[int], minutes: list[int], hours: list[int], when: str) -> tuple[str, bool]:
    """A 6-field rule's time of day: `at 09:00:30`, `every 15 seconds`, `at seconds 10, 40 of ...`."""
    if len(seconds) == 1 and len(minutes) * len(hours) <= LISTED:
        return "at " + _and([f"{h:02d}:{m:02d}:{seconds[0]:02d}" for h in hours for m in minutes]), False
    step = _step(seconds, 60)
    if len(seconds) == 60:
        part = "every second"
    elif step and len(seconds) > 2 and seconds[0] < step:
        part = f"every {step} seconds" + (f" from :{seconds[0]:02d}" if seconds[0] else "")
    else:
        part = f"at second{'s' if len(seconds) > 1 else ''} {_ranges(seconds)}"
    if len(minutes) == 60 and len(hours) == 24:
        return part, True
    return f"{part} of {'every minute' if len(minutes) == 60 else when.removeprefix('at ')}", True


def _hour_span(hours: list[int], minutes: list[int]) -> str:
    """` from 09:00 to 17:55` when the hours are one run of consecutive hours."""
    if hours != list(range(hours[0], hours[-1] + 1)):
        return ""
    return f" from {hours[0]:02d}:{minutes[0]:02d} to {hours[-1]:02d}:{minutes[-1]:02d}"


def _step(values: list[int], size: int) -> int:
    """n when `values` is every n-th value from the first one to the end of the field."""
    if len(values) < 2:
        return 0
    step = values[1] - values[0]
    return step if values == list(range(values[0], size, step)) else 0


def _days(spec) -> str:
    """The day part, as the spec's dialect combines the fields (spec.day_or: either matching
    is enough; else both must, a field admitting every day then saying nothing)."""
    month_days = _month_days_in_words(spec) if spec.day_restricted else ""
    weekdays = _weekdays_in_words(spec) if spec.weekday_restricted else ""
    if spec.day_or:
        if not month_days or not weekdays:  # one side admits every day: so does the rule
            return ""
        return f" on {month_days} or on {weekdays}"
    if month_days and weekdays:
        return f" on {month_days} when it is {weekdays}"
    return f" on {month_days or weekdays}" if month_days or weekdays else ""


_ORDINALS = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 5: "5th"}


def _month_days_in_words(spec) -> str:
    parts = [f"day{'s' if len(spec.days) > 1 else ''} {_ranges(list(spec.days))} of the month"] if spec.days else []
    for special in spec.day_specials:
        if special[0] == "last":
            parts.append("the last day of the month" if not special[1] else
                         f"{special[1]} day{'s' if special[1] > 1 else ''} before the last day of the month")
        elif special[0] == "nearest":
            parts.append(f"the weekday nearest day {special[1]} of the month")
        else:
            parts.append("the last weekday of the month")
    return " or ".join(parts)


def _weekdays_in_words(spec) -> str:
    parts = [_weekdays(sorted(spec.weekdays))] if spec.weekdays else []
    for weekday, nth in spec.weekday_specials:
        parts.append(f"the {'last' if nth == 0 else _ORDINALS[nth]} {DAYS[weekday]} of the month")
    return " or ".join(parts)


def _weekdays(days: list[int]) -> str:
    if len(days) > 2 and days == list(range(days[0], days[-1] + 1)):
        return f"{DAYS[days[0]]}-{DAYS[days[-1]]}"
    return ", ".join(DAYS[day] for day in days)


def _ranges(values: list[int]) -> str:
    """`1-5, 10, 15`."""
    return ", ".join(value_ranges(values))


def _listed(names: list[str], values) -> str:
    values = list(values)
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{names[0]}-{names[-1]}"
    return ", ".join(names)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def elapsed(seconds: float) -> str:
    """`0.4 s`, `12 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`: a span as a person reads it."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    seconds = int(seconds)
    for big, big_size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if seconds >= big_size:
            rest = (seconds % big_size) // small_size
            return f"{seconds // big_size} {big}" + (f" {rest} {small}" if rest else "")
    return f"{seconds} s"
