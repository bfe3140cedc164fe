"""Capacity reserved for strict runs (STRICT_RESERVED_SHARE). In a resource class whose
workers report live slots, ordinary runs are claimed only while fewer than
floor((1 - share) x live slots) ordinary runs of the class are running; strict runs (of
schedules with startDeadlineSeconds) may take any slot. Without live slots reported, a
class reserves nothing.

Cost on the claim path: the live slots and running ordinary runs of each class ride on the
claim's existing statements (the tenant loads, the tenant recount) as uncorrelated
subqueries (statements.claim.live_slots, running_ordinary), evaluated once per
statement. The one statement the reserve adds: a claimer that may take ordinary runs of a
class with room left locks that class (a transaction-level advisory lock, taken before any
tenant lock: statements.claim.resource_classes_lock_reserved), and acts on the count of the
recount read after it, so claimers racing for the last ordinary slots of a class take turns
and never overshoot. A class at its ordinary cap is not locked: its ordinary runs are left
for a later claim. With STRICT_RESERVED_SHARE = 0 (the default), or no live slots reported,
nothing changes.
"""

from __future__ import annotations

import math

from django.conf import settings

from runs.authority.statements import claim
from runs.models import Run


class Reserve:
    """Ordinary headroom per resource class for one claim transaction."""

    def __init__(self, classes: list[str], share: float | None = None):
        self.share = settings.STRICT_RESERVED_SHARE if share is None else share
        self.classes = list(classes) if self.share > 0 else []
        self.caps: dict[str, int] = {}  # class -> most ordinary runs running at once
        self.running: dict[str, int] = {}  # class -> ordinary runs running
        self.locked: set[str] = set()
        self.exact = False  # running was read after the class locks

    def live_columns(self) -> list[tuple[str, list]]:
        """Columns of the tenant-loads query: each class's live slots, then the running_columns."""
        return [claim.live_slots(rc) for rc in self.classes] + self.running_columns()

    def running_columns(self) -> list[tuple[str, list]]:
        """Columns of a tenant query: each class's running ordinary runs."""
        return [claim.running_ordinary(rc) for rc in self.classes]

    def read_loads_row(self, values) -> None:
        """Caps and (unlocked) running counts from the live_columns of a tenant-loads row."""
        n = len(self.classes)
        for rc, live, running in zip(self.classes, values[:n], values[n:]):
            if live > 0:
                self.caps[rc] = math.floor((1 - self.share) * live + 1e-9)
                self.running[rc] = running

    def read_recount_row(self, values) -> None:
        """Running counts (the running_columns of a recount row) read after the class locks
        (and this transaction's own claims)."""
        for rc, running in zip(self.classes, values):
            if rc in self.caps:
                self.running[rc] = running
        self.exact = True

    def lock_open_classes(self) -> None:
        """Lock the classes with a reserve where ordinary runs may still be claimed, in one
        order. A class at its cap is left unlocked: this claim takes only its strict runs."""
        opened = sorted(rc for rc, cap in self.caps.items() if self.running[rc] < cap)
        if not opened:
            return
        claim.resource_classes_lock_reserved(opened)
        self.locked.update(opened)

    def closed(self) -> list[str]:
        """Classes whose ordinary runs this claim may not take."""
        return [rc for rc in self.caps if not self.may_take(rc)]

    def may_take(self, rc: str) -> bool:
        if rc not in self.caps:
            return True
        return self.exact and rc in self.locked and self.running[rc] < self.caps[rc]

    def take(self, run: Run) -> bool:
        """Whether `run` may start now; counts an ordinary one against its class."""
        if run.strict or run.resource_class not in self.caps:
            return True
        if not self.may_take(run.resource_class):
            return False
        self.running[run.resource_class] += 1
        return True

