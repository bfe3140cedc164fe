"""Next-instant cost of RRULE rules (schedules/recurrence/rrule.py): microseconds per
`next_after`, the call the scanner, the timers and preview make for every instant.

    .venv/bin/python bench/rrule_cost.py [--calls 2000] [--repeat 5]

No database. For each rule, two walks of `--calls` calls each, `--repeat` times (the median
and the worst repeat are printed): `chained` asks for the instant after the previous one
(the scanner's walk), `scattered` asks after instants spread over 30 years from 2027 (a
schedule read again after a while: the rule is started again far from its dtstart). A cron
rule is printed beside them for scale. Target (the time-language work): <= 100 us per instant.
"""

import sys
from datetime import timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _next_instant import print_costs  # noqa: E402
from schedules.recurrence import parse_rule  # noqa: E402

UTC = timezone.utc
RULES = [
    ("last Friday 17:00, London, 1 exdate", "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0", "Europe/London",
     ["2027-12-31T17:00:00"], []),
    ("weekdays 09:00, New York", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0", "America/New_York", [], []),
    ("every 2nd week Tue+Thu 08:30, 100 exdates", "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;BYHOUR=8;BYMINUTE=30",
     "Europe/Berlin", [f"{2027 + i // 12}-{i % 12 + 1:02d}-02T08:30:00" for i in range(100)], []),
    ("last weekday of the month (BYSETPOS=-1)", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18",
     "Australia/Lord_Howe", [], []),
    ("hourly at :30, Lord Howe", "FREQ=HOURLY;BYMINUTE=30", "Australia/Lord_Howe", [], []),
    ("every 7 s from year 1", "FREQ=SECONDLY;INTERVAL=7", "UTC", [], []),
    ("daily, COUNT=10000", "FREQ=DAILY;COUNT=10000;BYHOUR=6", "America/Santiago", [], []),
    ("Feb 29 on a Monday", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", "UTC", [], []),
]


def rrule(text, zone, exdates, rdates, dtstart):
    return parse_rule({"kind": "rrule", "rrule": text, "dtstart": dtstart, "timezone": zone,
                       "exdates": exdates, "rdates": rdates})


def main():
    rows = [(name, rrule(text, zone, ex, rd, "0001-01-02T00:00:00" if "year 1" in name else "2027-01-01T00:00:00"))
            for name, text, zone, ex, rd in RULES]
    rows.append(("cron 0 9 * * 1-5, New York (for scale)",
                 parse_rule({"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "America/New_York"})))
    print_costs(rows, years=30)


if __name__ == "__main__":
    main()
