"""Forecast incidents: opened before the miss, from the capacity forecast (filled in below)."""


def forecast_breaches(now):
    return []


def forecast_resolutions(now) -> int:
    return 0
