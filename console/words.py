"""A schedule's rule in words, as the console lists it: "at 09:00 on Mon-Fri (America/New_York)"."""

from schedules.recurrence import RecurrenceError, parse_rule

DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def rule_in_words(recurrence: dict) -> str:
    try:
        rule = parse_rule(recurrence, anchor_required=False)
    except (RecurrenceError, TypeError, ValueError):
        return "unreadable rule"
    zone = f" ({rule.timezone})"
    if rule.kind == "interval":
        return f"every {_duration(rule.every_seconds)}"
    if rule.kind == "once":
        return f"once at {rule.at:%Y-%m-%d %H:%M:%S} UTC"
    if rule.kind == "after_completion":
        return f"{_duration(rule.delay_seconds)} after the previous run ends"
    return _cron_words(rule.cron) + zone


def _duration(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}s" if count != 1 else unit
    return f"{seconds} seconds" if seconds != 1 else "second"


def _cron_words(cron: str) -> str:
    fields = cron.split()
    if len(fields) != 5:
        return f"cron {cron}"
    minute, hour, dom, month, dow = fields
    if (dom, month) != ("*", "*"):
        return f"cron {cron}"
    if minute.isdigit() and hour.isdigit():
        when = f"at {int(hour):02d}:{int(minute):02d}"
    elif minute == "*" and hour == "*":
        when = "every minute"
    elif minute.startswith("*/") and minute[2:].isdigit() and hour == "*":
        when = f"every {minute[2:]} minutes"
    elif minute.isdigit() and hour == "*":
        when = f"every hour at :{int(minute):02d}"
    else:
        return f"cron {cron}"
    return when + _days(dow)


def _days(dow: str) -> str:
    if dow == "*":
        return " every day"
    if "-" in dow and all(part.isdigit() and int(part) <= 7 for part in dow.split("-", 1)):
        start, end = (int(part) for part in dow.split("-", 1))
        return f" on {DAYS[start]}-{DAYS[end]}"
    if all(part.isdigit() and int(part) <= 7 for part in dow.split(",")):
        return " on " + ", ".join(DAYS[int(part)] for part in dow.split(","))
    return f" on days {dow}"
