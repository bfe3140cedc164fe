"""The overlap policy's one decision, table-driven: no database (runs.overlap is pure)."""

import pytest

from runs.overlap import Step, admit, takes_guard

START, WAIT, SKIP = Step.START, Step.WAIT, Step.SKIP

# policy, guard holder, this run, waiting ahead, new instant -> step
TABLE = [
    # A new instant: free guard and nobody waiting starts, whatever the policy.
    ("buffer_one", None, None, 0, True, START),
    ("skip", None, None, 0, True, START),
    ("allow", None, None, 0, True, START),
    # Guard held, buffer empty: buffer_one keeps one waiter, skip keeps none, allow runs alongside.
    ("buffer_one", "run_a", None, 0, True, WAIT),
    ("skip", "run_a", None, 0, True, SKIP),
    ("allow", "run_a", None, 0, True, START),
    # Someone already waits (buffer full): a new instant is skipped, unless allow.
    ("buffer_one", "run_a", None, 1, True, SKIP),
    ("buffer_one", None, None, 1, True, SKIP),
    ("skip", None, None, 2, True, SKIP),
    ("allow", "run_a", None, 5, True, START),
    # An admitted occurrence (claim, or reconsidered when the holder finishes) never skips.
    ("buffer_one", None, "run_b", 0, False, START),
    ("skip", None, "run_b", 0, False, START),
    ("buffer_one", "run_a", "run_b", 0, False, WAIT),
    ("skip", "run_a", "run_b", 0, False, WAIT),
    ("allow", "run_a", "run_b", 0, False, START),
    # The holder itself (a retry of the guard holder) starts again.
    ("buffer_one", "run_a", "run_a", 0, False, START),
    ("skip", "run_a", "run_a", 3, False, START),
]


@pytest.mark.parametrize("policy, guard, run_id, waiting, new, expected", TABLE)
def test_admit__table(policy, guard, run_id, waiting, new, expected):
    assert admit(policy, guard=guard, run_id=run_id, waiting=waiting, new=new) is expected


@pytest.mark.parametrize("policy, expected", [("buffer_one", True), ("skip", True), ("allow", False)])
def test_takes_guard__every_policy_but_allow(policy, expected):
    assert takes_guard(policy) is expected
