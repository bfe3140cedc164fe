"""parse_instant: the one reading of an instant's text (no database)."""

from datetime import datetime, timezone

import pytest

from schedules.recurrence import EARLIEST, LATEST, InstantOutOfRange, NotAnInstant, parse_instant

UTC = timezone.utc


@pytest.mark.parametrize("text, expected", [
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2026-01-01t00:00:00z", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2026-01-01T09:30:00.5+09:30", datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2025-12-31T19:00-05:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ("0001-01-02T00:00:00Z", EARLIEST),
    ("9999-12-30T23:59:59.999999Z", LATEST),
])
def test_parse_instant__the_contracts_form(text, expected):
    assert parse_instant(text) == expected


@pytest.mark.parametrize("text", [
    "2026-01-01 00:00:00Z", "2026-01-01T00:00:00 Z", "2026-01-01T00:00:00 +00:00", "2026-01-01X00:00:00Z",
    " 2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z ", "2026-01-01T00:00:00", "2026-01-01", "2026-01-01T00:00:00Z\x00",
    "\uff12\uff10\uff12\uff16-01-01T00:00:00Z", "2026-01-01T00:00:00+00:00" + "0" * 20, "2026-13-01T00:00:00Z",
    "", None, 20260101, ["2026-01-01T00:00:00Z"],
])
def test_parse_instant__anything_else_is_not_an_instant(text):
    with pytest.raises(NotAnInstant):
        parse_instant(text)


@pytest.mark.parametrize("text", ["0001-01-01T23:59:59Z", "9999-12-31T00:00:00Z", "0001-01-01T00:00:00+01:00"])
def test_parse_instant__outside_the_renderable_range(text):
    with pytest.raises(InstantOutOfRange):
        parse_instant(text)
