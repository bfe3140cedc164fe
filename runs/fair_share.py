"""Weighted fair choice of which tenants get the next free slots (pure)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TenantLoad:
    tenant_id: str
    weight: int
    running: int
    max_running: int


def allocate_slots(loads: list[TenantLoad], slots: int) -> dict[str, int]:
    """Hand out ``slots`` one at a time to the tenant with the lowest running/weight share.

    A tenant at its active-run limit gets nothing; ties go to the earlier tenant in
    ``loads`` (callers order it, e.g. by oldest waiting run) so allocation is deterministic.
    """
    allocated = {load.tenant_id: 0 for load in loads}
    for _ in range(slots):
        best, best_share = None, None
        for load in loads:
            taken = load.running + allocated[load.tenant_id]
            if taken >= load.max_running:
                continue
            share = taken / load.weight
            if best_share is None or share < best_share:
                best, best_share = load, share
        if best is None:
            break
        allocated[best.tenant_id] += 1
    return {tenant: n for tenant, n in allocated.items() if n}
