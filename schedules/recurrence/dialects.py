"""What a cron rule's dialect changes: the ``ambiguous_day_fields`` warning of a rule whose
two day fields are both restricted, with each dialect's next instants side by side."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from schedules.recurrence.cron import DIALECTS, compile_cron
from schedules.recurrence.errors import RecurrenceError
from schedules.recurrence.instants import UTC
from schedules.recurrence.rules import Rule, preview

ALTERNATIVES = 5


def both_day_fields_restricted(rule: Rule) -> bool:
    """Neither day field is exactly ``*`` (or ``?``): the dialects may read the rule differently."""
    return rule.kind == "cron" and compile_cron(rule.cron, "or", rule.hash_key).day_or


def day_field_warnings(rule: Rule, after: datetime) -> list[dict]:
    """``[]``, or the one ``ambiguous_day_fields`` warning with each dialect's next five
    instants after ``after`` (an empty list for a dialect under which the rule never matches)."""
    if not both_day_fields_restricted(rule):
        return []
    alternatives = {}
    for dialect in DIALECTS:
        try:
            instants = preview(replace(rule, dialect=dialect), after, ALTERNATIVES)
        except RecurrenceError:  # e.g. "31 Feb and Monday" never matches under `and`
            instants = []
        alternatives[dialect] = [_iso(at) for at in instants]
    return [{
        "code": "ambiguous_day_fields",
        "message": (f"both day fields of {rule.cron!r} are restricted: under dialect {rule.dialect!r} "
                    + ("a day matches when either field matches" if compile_cron(rule.cron, rule.dialect,
                                                                                   rule.hash_key).day_or
                       else "a day matches only when both fields match")
                    + "; set recurrence.dialect to say which you mean"),
        "alternatives": alternatives,
    }]


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
