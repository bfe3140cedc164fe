"""Recurrence rules: validation of the API's ``recurrence`` object and occurrence math.

Pure Python (stdlib + zoneinfo) so the API, the materializer and the tests share one
implementation without needing Django.

These kinds of rule exist:

* ``cron``: 5-field cron (6 with seconds first; ``L``, ``W``, ``#``, ``?``, ``H``, ``@``
  macros) in one of three dialects (``cron.DIALECTS``), matched on local wall-clock time in
  the rule's IANA zone. A local time inside a DST gap fires once, at the instant ``fold=0`` gives
  (shifted forward by the gap); a repeated local time fires once, at its first
  occurrence; local slots resolving to the same instant are one occurrence.
* ``interval``: ``anchor + k * everySeconds`` for integers ``k >= 0``.
* ``after_completion``: the previous occurrence's end plus ``delaySeconds``.
* ``once``: the single instant ``at`` (a schedule created after it never fires).
* ``business_day``: the n-th (or n-th last) business day of each month at a local time;
  a business day is a Monday-Friday no calendar of the rule excludes (``calendars``).
* ``rrule``: an RFC 5545 RRULE from a local ``dtstart``, with local ``exdates`` and
  ``rdates``, expanded by python-dateutil on the zone's wall clock; its local times meet
  the DST policy of cron (``wallclock``).

The cron matcher is in ``cron``, RRULE expansion in ``rrule``, the DST walk in ``wallclock``, the rules and occurrence math in ``rules``, the reading
of an instant's text and the renderable range in ``instants``, the client errors in
``errors``, calendars (exclusions, shifts, business days) in ``calendars``; this package is their public surface.
"""

from schedules.recurrence.cron import (
    DEFAULT_DIALECT,
    DIALECTS,
    MAX_CRON_LENGTH,
    MAX_HASH_KEY_LENGTH,
    min_period_seconds,
    normalize_cron,
)
from schedules.recurrence.errors import InvalidCron, InvalidRecurrence, InvalidRRule, InvalidTimezone, RecurrenceError
from schedules.recurrence.instants import (
    EARLIEST,
    LATEST,
    MAX_INSTANT_LENGTH,
    InstantOutOfRange,
    NotAnInstant,
    parse_instant,
    renderable,
)
from schedules.recurrence.rrule import MAX_DATES, MAX_RRULE_LENGTH
from schedules.recurrence.rules import (
    MAX_CALENDARS,
    MAX_SECONDS,
    Rule,
    calendar_excluded,
    calendar_shifted_from,
    check_calendar_policy,
    parse_calendar_ids,
    parse_calendar_policy,
    preview_entries,
    first_not_before,
    in_window,
    instants_between,
    local_rendering,
    next_after,
    parse_rule,
    preview,
    render_local,
)

__all__ = [
    "RecurrenceError",
    "InvalidCron",
    "InvalidTimezone",
    "InvalidRecurrence",
    "InvalidRRule",
    "Rule",
    "MAX_CALENDARS",
    "calendar_excluded",
    "calendar_shifted_from",
    "check_calendar_policy",
    "parse_calendar_ids",
    "parse_calendar_policy",
    "preview_entries",
    "parse_rule",
    "next_after",
    "first_not_before",
    "in_window",
    "preview",
    "instants_between",
    "local_rendering",
    "render_local",
    "renderable",
    "parse_instant",
    "NotAnInstant",
    "InstantOutOfRange",
    "MAX_INSTANT_LENGTH",
    "EARLIEST",
    "LATEST",
    "normalize_cron",
    "min_period_seconds",
    "MAX_CRON_LENGTH",
    "MAX_HASH_KEY_LENGTH",
    "DIALECTS",
    "DEFAULT_DIALECT",
    "MAX_SECONDS",
    "MAX_RRULE_LENGTH",
    "MAX_DATES",
]
