"""Who asks the authority, and when (workers/idle_claims.py). The node's times live in shared
memory; these checks drive them with explicit instants. The worker itself is exercised with
real processes in tests/e2e/test_idle_claims.py."""

import time

from workers.idle_claims import CLAIM, PROBE, TAKE_OVER_SECONDS, Node

FIRST, SECOND = 101, 102  # process ids


def test_node__quiet_only_after_an_interval_without_a_received_task():
    node = Node(["short"], 1.0)
    now = time.monotonic()
    assert not node.quiet(now)
    assert node.quiet(now + 1.0)
    node.received()
    assert not node.quiet(time.monotonic() + 0.5)


def test_node__one_process_asks_per_interval_and_keeps_asking_while_free():
    node = Node(["short"], 1.0)
    t = time.monotonic()
    assert node.turn(t, FIRST) == PROBE
    assert node.turn(t, SECOND) is None and node.turn(t + 0.9, FIRST) is None
    assert node.turn(t + 1.0, SECOND) is None  # the last asker's turn, if it is free
    assert node.turn(t + 1.0, FIRST) == PROBE and node.prober() == FIRST


def test_node__another_process_takes_over_when_the_asker_stays_busy():
    node = Node(["short"], 1.0)
    t = time.monotonic()
    assert node.turn(t, FIRST) == PROBE
    assert node.turn(t + 1.0 + TAKE_OVER_SECONDS, SECOND) == PROBE and node.prober() == SECOND


def test_node__work_found__every_free_process_claims_until_a_claim_finds_none():
    node = Node(["short"], 1.0)
    assert node.turn(time.monotonic(), FIRST) == PROBE
    node.found(True)
    assert node.turn(time.monotonic(), SECOND) == CLAIM and node.turn(time.monotonic(), FIRST) == CLAIM
    node.found(False)
    assert node.turn(time.monotonic(), SECOND) is None  # back to one question per interval


def test_node__broker_lost__quiet_at_once_and_any_free_process_asks_now():
    node = Node(["short"], 1.0)
    t = time.monotonic()
    assert node.turn(t, FIRST) == PROBE
    node.received()
    node.lost_broker()
    now = time.monotonic()
    assert node.quiet(now) and node.turn(now, SECOND) == PROBE
