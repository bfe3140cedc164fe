"""The wave simulation serves runs in the claim's order (runs.authority.claims), computed by
hand: weighted fair share across tenants, strict runs first within a tenant, strict tenants
first among equal shares, the reserved share, the active-run limit. And its cost is bounded."""

import math
import random

import pytest

from runs.capacity.waves import Arrival, Busy, Claimants, SimulationTooLong, Steps, simulate
from runs.fair_share import TenantLoad, allocate_slots


def test_strict_runs_start_first_within_a_tenant__ordinary_ones_due_earlier_wait():
    # One slot: the first ordinary run holds it until 5 s (a run is never preempted); then the
    # strict one, due later, comes before the two ordinary ones left.
    result = simulate([Arrival(0, 5, 3, "ordinary", "a"), Arrival(1, 5, 1, "strict", "a", strict=True)], 1)
    assert dict(result["strict"].counts) == {4: 1} and dict(result["ordinary"].counts) == {0: 1, 10: 1, 15: 1}
    result = simulate([Arrival(0, 5, 10, "ordinary", "a"), Arrival(0, 5, 2, "strict", "a", strict=True)], 10)
    assert dict(result["strict"].counts) == {0: 2} and dict(result["ordinary"].counts) == {0: 8, 5: 2}


def test_another_tenants_load_does_not_delay_a_tenant_beyond_its_fair_share():
    """B's 1,000 runs due first do not queue A's run behind them: at the next free slot, A
    (nothing running) comes before B (ten running)."""
    result = simulate([Arrival(0, 5, 1000, "b", "b"), Arrival(1, 5, 1, "a", "a")], 10)
    assert dict(result["a"].counts) == {4: 1}  # the first slot freed, at 5 s
    assert result["b"].percentile(100) == 500  # one slot-turn later than without A


def test_equal_shares__a_tenant_with_strict_work_waiting_comes_first():
    result = simulate([Arrival(0, 5, 1, "plain", "a"), Arrival(0, 5, 1, "urgent", "z", strict=True)], 1)
    assert dict(result["urgent"].counts) == {0: 1} and dict(result["plain"].counts) == {5: 1}


def test_weighted_shares__slots_split_by_weight():
    arrivals = [Arrival(0, 10, 40, "heavy", "heavy"), Arrival(0, 10, 40, "light", "light")]
    result = simulate(arrivals, 8, claimants=Claimants({"heavy": (3, 100), "light": (1, 100)}))
    assert result["heavy"].counts[0] == 6 and result["light"].counts[0] == 2


def test_active_run_limit_and_reserved_share_hold():
    limited = simulate([Arrival(0, 5, 4, "a", "a")], 10, claimants=Claimants({"a": (1, 2)}))
    assert dict(limited["a"].counts) == {0: 2, 5: 2}
    # 10 slots, 20 % reserved: at most 8 ordinary runs at once; a strict run takes a reserved slot.
    arrivals = [Arrival(0, 5, 10, "ordinary", "a"), Arrival(1, 5, 1, "strict", "b", strict=True)]
    reserved = simulate(arrivals, 10, claimants=Claimants(reserved_share=0.2))
    assert dict(reserved["ordinary"].counts) == {0: 8, 5: 2} and dict(reserved["strict"].counts) == {0: 1}


def test_busy_slots_count_for_their_tenant_share():
    """The slot busy with B's run counts in B's share when it is handed out."""
    busy = [Busy(3, "b"), Busy(3, "b")]
    result = simulate([Arrival(0, 5, 2, "b", "b"), Arrival(0, 5, 2, "a", "a")], 3, busy_until=busy)
    assert dict(result["a"].counts) == {0: 1, 3: 1} and dict(result["b"].counts) == {3: 1, 5: 1}


def test_nothing_starts_after_until__and_a_budget_bounds_the_steps():
    result = simulate([Arrival(0, 5, 4)], 1, until=7)
    assert dict(result[None].counts) == {0: 1, 5: 1, math.inf: 2}
    with pytest.raises(SimulationTooLong):
        simulate([Arrival(k, 5, 1) for k in range(1000)], 1, budget=Steps(100))


def test_allocate_slots__in_bulk_as_one_at_a_time():
    """The bulk allocation hands out exactly what handing slots out one by one does."""

    def one_at_a_time(loads, slots):
        given = {load.tenant_id: 0 for load in loads}
        for _ in range(slots):
            open_loads = [l for l in loads if l.running + given[l.tenant_id] < l.max_running]
            if not open_loads:
                break
            best = min(open_loads, key=lambda l: (l.running + given[l.tenant_id]) / l.weight)  # first of the lowest
            given[best.tenant_id] += 1
        return {tenant: n for tenant, n in given.items() if n}

    draw = random.Random(7)
    for _ in range(3000):
        loads = [TenantLoad(f"t{k}", draw.choice([1, 1, 2, 3, 5, 7]), draw.randint(0, 12), draw.randint(0, 20))
                 for k in range(draw.randint(1, 5))]
        slots = draw.randint(0, 40)
        assert allocate_slots(loads, slots) == one_at_a_time(loads, slots), (loads, slots)
    assert allocate_slots([TenantLoad("a", 1, 0, 10**9), TenantLoad("b", 1, 0, 10**9)], 10_000) == {"a": 5000, "b": 5000}
