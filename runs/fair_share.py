"""Weighted fair choice of which tenants get the next free slots (pure)."""

import math
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
    Computed in bulk (the capacity simulation hands out thousands of slots at once), with the
    same result as one at a time: the tenant's j-th running slot has the share j/weight, and
    the ``slots`` lowest shares win, equal shares in ``loads`` order.
    """
    open_loads = [load for load in loads if load.max_running > load.running]
    wanted = min(slots, sum(load.max_running - load.running for load in open_loads))
    if wanted <= 0:
        return {}
    if len(open_loads) == 1:
        return {open_loads[0].tenant_id: wanted}
    if wanted == 1:  # the first of the lowest shares
        return {min(open_loads, key=lambda load: load.running / load.weight).tenant_id: 1}
    # Shares as integers: share j/weight is j * (scale / weight).
    scale = math.lcm(*(load.weight for load in open_loads))
    steps = [scale // load.weight for load in open_loads]

    def below(level: int) -> list[int]:
        """Per tenant: how many of its slots have a share below `level`."""
        return [min(load.max_running - load.running, max(0, -(-level // step) - load.running))
                for load, step in zip(open_loads, steps)]

    # The share of the last slot handed out: the lowest level with `wanted` slots at or below it.
    low, high = 0, max((load.running + wanted) * step for load, step in zip(open_loads, steps))
    while low < high:
        middle = (low + high) // 2
        if sum(below(middle + 1)) >= wanted:
            high = middle
        else:
            low = middle + 1
    given = below(low)
    left = wanted - sum(given)
    for k, (load, step) in enumerate(zip(open_loads, steps)):  # equal shares at that level: in order
        if left and given[k] < load.max_running - load.running and (load.running + given[k]) * step == low:
            given[k] += 1
            left -= 1
    return {load.tenant_id: n for load, n in zip(open_loads, given) if n}
