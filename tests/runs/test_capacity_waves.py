"""The wave simulation against waves computed by hand."""

import math

import pytest

from runs.capacity.waves import Arrival, Lateness, simulate, slots_needed, wave_lateness


def test_design_burst__50000_five_second_runs_on_10000_slots_start_in_five_waves():
    lateness = wave_lateness([Arrival(0, 5, 50_000)], 10_000)
    assert dict(lateness.counts) == {0: 10_000, 5: 10_000, 10: 10_000, 15: 10_000, 20: 10_000}
    assert lateness.percentile(50) == 10
    assert lateness.percentile(99) == 20
    assert lateness.share_later_than(10) == pytest.approx(0.40)  # 40 % miss the 10 s objective


def test_design_burst__slots_needed_for_the_objective():
    # p99 within 10 s: three waves (0, 5, 10) must start 99 % of 50,000 = 49,500.
    assert slots_needed([Arrival(0, 5, 50_000)], 10) == 16_500
    assert wave_lateness([Arrival(0, 5, 50_000)], 16_499).percentile(99) == 15
    # Starting 99 % at once takes a slot each; at p100, every one of them.
    assert slots_needed([Arrival(0, 5, 50_000)], 0) == 49_500
    assert slots_needed([Arrival(0, 5, 50_000)], 0, percentile=100) == 50_000


def test_slots_busy_with_earlier_work_delay_the_wave():
    # 4 slots, two busy until t=3: 6 one-second runs at t=0 start 0,0,1,1,2,2 on the free pair.
    lateness = wave_lateness([Arrival(0, 1, 6)], 4, busy_until=[3, 3])
    assert dict(lateness.counts) == {0: 2, 1: 2, 2: 2}
    lateness = wave_lateness([Arrival(0, 2, 6)], 4, busy_until=[1, 1])
    # free pair at 0 (runs 1,2 -> free at 2); busy pair free at 1 (runs 3,4 -> free at 3); runs 5,6 at 2.
    assert dict(lateness.counts) == {0: 2, 1: 2, 2: 2}


def test_later_arrivals_queue_behind_an_earlier_wave():
    # 2 slots; 4 ten-second runs at 0, then 1 run at 5: the slots free at 10 and 20.
    result = simulate([Arrival(0, 10, 4, "first"), Arrival(5, 10, 1, "second")], 2)
    assert dict(result["first"].counts) == {0: 2, 10: 2}
    assert dict(result["second"].counts) == {15: 1}  # starts at 20


def test_an_arrival_after_the_slots_free_starts_on_time():
    result = simulate([Arrival(0, 5, 3, "a"), Arrival(30, 5, 3, "b")], 3)
    assert dict(result["b"].counts) == {0: 3}


def test_no_slots__every_start_is_infinitely_late():
    lateness = wave_lateness([Arrival(0, 1, 3)], 0)
    assert lateness.percentile(50) == math.inf


def test_percentiles_are_nearest_rank():
    lateness = Lateness()
    for seconds in range(1, 101):
        lateness.add(seconds, 1)
    assert (lateness.percentile(50), lateness.percentile(99), lateness.percentile(100)) == (50, 99, 100)
    assert Lateness().percentile(99) is None


def test_zero_duration_probe_takes_no_capacity():
    # A probe (duration 0) measures when a start would happen without delaying anyone.
    result = simulate([Arrival(0, 5, 2, "wave"), Arrival(0, 0, 1, "probe"), Arrival(0, 5, 1, "after")], 2)
    assert dict(result["probe"].counts) == {5: 1}
    assert dict(result["after"].counts) == {5: 1}
