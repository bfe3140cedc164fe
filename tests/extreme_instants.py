"""Hypothesis strategies for the inputs that once reached a 500: instants near the ends of
datetime's range, any UTC offset, and zones with the widest offsets."""

from datetime import date
from zoneinfo import available_timezones

from hypothesis import strategies as st

# Zones with the widest offsets (+14, -12), odd minutes, and historic local mean time.
EXTREME_ZONES = ["Pacific/Kiritimati", "Etc/GMT-14", "Etc/GMT+12", "Pacific/Chatham", "Asia/Kathmandu",
                 "America/St_Johns", "Asia/Manila", "Pacific/Apia", "America/Adak", "UTC"]
ALL_ZONES = sorted(available_timezones() - {"localtime", "posixrules"})


def instants() -> st.SearchStrategy[str]:
    """ISO 8601 instants, mostly near year 1 or 9999, with any offset from -23:59 to +23:59."""
    day = st.one_of(
        st.dates(min_value=date(1, 1, 1), max_value=date(1, 1, 3)),
        st.dates(min_value=date(9999, 12, 29), max_value=date(9999, 12, 31)),
        st.dates(),
    )
    offset = st.one_of(
        st.just("Z"),
        st.builds("{}{:02d}:{:02d}".format, st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59)),
    )
    return st.builds(lambda d, t, o: f"{d.isoformat()}T{t.isoformat()}{o}", day, st.times(), offset)


def zones() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(EXTREME_ZONES), st.sampled_from(ALL_ZONES))
