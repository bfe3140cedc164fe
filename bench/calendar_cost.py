"""Next-instant cost of rules under calendars (schedules/recurrence/calendars.py):
microseconds per `next_after` of the business_day kind and of cron rules with a schedule's
calendar (skip, shift_before, shift_after).

    .venv/bin/python bench/calendar_cost.py [--calls 2000] [--repeat 5]

No database. Two calendars as a bank would hold them: ten years of holidays (about 100
dates), annual dates, and one with weekends. `chained` asks for the instant after the
previous one (the scanner's walk); `scattered` asks after instants spread over 10 years.
Target (the time-language work): business day with two calendars <= 50 us per instant.
"""

import sys
from datetime import date, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _next_instant import print_costs  # noqa: E402
from schedules.recurrence import parse_rule  # noqa: E402
from schedules.recurrence.calendars import CalendarDays  # noqa: E402

UTC = timezone.utc
ZONE = "America/New_York"
HOLIDAYS = CalendarDays("cal_us", ZoneInfo(ZONE), frozenset(
    date(2027 + year, month, day) for year in range(10)
    for month, day in ((1, 1), (1, 18), (2, 15), (5, 31), (6, 19), (7, 5), (9, 6), (10, 11), (11, 11), (11, 25))),
    frozenset({(12, 25), (12, 26)}), frozenset())
WEEKENDS = CalendarDays("cal_we", ZoneInfo("Europe/London"), frozenset(), frozenset({(1, 1)}), frozenset({6, 7}))
BY_ID = {c.calendar_id: c for c in (HOLIDAYS, WEEKENDS)}


def rules():
    business = parse_rule({"kind": "business_day", "days": [1, -1], "at": "17:00", "timezone": ZONE,
                           "calendarIds": ["cal_us", "cal_we"]}).bound(BY_ID)
    weekdays = {"kind": "cron", "cron": "0 9 * * 1-5", "timezone": ZONE}
    yield "business_day [1, -1] 17:00, two calendars", business
    for policy in ("skip", "shift_before", "shift_after"):
        yield (f"cron 0 9 * * 1-5, two calendars, {policy}",
               parse_rule(weekdays).calendared(["cal_us", "cal_we"], policy).bound(BY_ID))
    yield "cron 0 9 * * 1-5, no calendar (for scale)", parse_rule(weekdays)


def main():
    print_costs(rules(), years=9, wrap_year=2036)


if __name__ == "__main__":
    main()
