from datetime import UTC, datetime, timedelta, timezone

import pytest

from kernel.clock import instant


@pytest.mark.parametrize(
    "value, expected",
    [
        (datetime(2026, 9, 23, 13, 0, tzinfo=UTC), "2026-09-23T13:00:00Z"),
        (datetime(2026, 9, 23, 13, 0, 0, 120000, tzinfo=UTC), "2026-09-23T13:00:00.120000Z"),
        (datetime(2026, 9, 23, 9, 0, tzinfo=timezone(timedelta(hours=-4))), "2026-09-23T13:00:00Z"),
        (datetime(61, 4, 6, 21, 46, 41, tzinfo=UTC), "0061-04-06T21:46:41Z"),
        (None, None),
    ],
)
def test_instant__is_utc_with_z(value, expected):
    assert instant(value) == expected
