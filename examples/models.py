"""A team's own table, as a job writes it with its fence (examples.daily_totals)."""

from django.db import models

from workers.jobs import FencedRow


class DailyTotal(FencedRow):
    """One day's order totals, written by that day's occurrence of examples.daily_totals;
    ``fence_run_id`` and ``fence`` (FencedRow) name the attempt that wrote it last."""

    day = models.DateField(unique=True)
    orders = models.PositiveIntegerField()
    revenue = models.DecimalField(max_digits=14, decimal_places=2)
    written_by_attempt = models.PositiveIntegerField()

    def __str__(self):
        return f"{self.day}: {self.orders} orders"
