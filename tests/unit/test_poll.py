"""poll: a condition asked again every few seconds up to a deadline, the last value judged by the caller.

The waits here are the helper's own subject: every deadline is a fraction of a second.
"""

from __future__ import annotations

import time

import pytest

from gpucluster.errors import LocalWorldError
from gpucluster.poll import Deadline, poll, wait_for


class Counter:
    """A step whose value becomes truthy on its ``ready_at``-th call."""

    def __init__(self, ready_at: int) -> None:
        self.calls, self.ready_at = 0, ready_at

    def __call__(self) -> int:
        self.calls += 1
        return self.calls if self.calls >= self.ready_at else 0


def test_a_met_condition_returns_at_once_with_its_value() -> None:
    step = Counter(1)
    started = time.monotonic()
    assert poll(step, timeout=10, every=5) == 1
    assert step.calls == 1 and time.monotonic() - started < 1


def test_the_step_is_asked_again_until_it_is_done() -> None:
    step = Counter(3)
    assert poll(step, timeout=10, every=0.01) == 3
    assert step.calls == 3


def test_at_the_deadline_the_last_value_comes_back_undone() -> None:
    pending = ["ns/a"]
    started = time.monotonic()
    assert poll(lambda: pending, timeout=0.2, every=0.05, done=lambda left: not left) == ["ns/a"]
    assert 0.2 <= time.monotonic() - started < 2


def test_a_zero_timeout_still_asks_once() -> None:
    step = Counter(1)
    assert poll(step, timeout=0, every=1) == 1 and step.calls == 1
    late = Counter(2)
    assert poll(late, timeout=0, every=1) == 0 and late.calls == 1


def test_the_last_pause_ends_at_the_deadline_and_the_step_is_asked_once_more() -> None:
    # every=10 would sleep far past a 0.2 s deadline; the pause is cut to the time left, then one more ask
    step = Counter(2)
    started = time.monotonic()
    assert poll(step, timeout=0.2, every=10) == 2
    assert step.calls == 2 and time.monotonic() - started < 2


def test_waits_sharing_one_deadline_share_its_budget() -> None:
    deadline = Deadline.after(0.3)
    poll(lambda: False, timeout=deadline, every=0.05)
    assert deadline.left() == 0
    step = Counter(5)
    assert poll(step, timeout=deadline, every=0.05) == 0 and step.calls == 1  # nothing left: asked once


def test_an_error_in_the_step_stops_the_wait() -> None:
    def step() -> bool:
        raise LocalWorldError("etcd exited during start-up")

    with pytest.raises(LocalWorldError, match="exited during start-up"):
        poll(step, timeout=10, every=0.01)


def test_wait_for_names_what_it_waited_for_how_long_and_what_it_last_saw() -> None:
    with pytest.raises(LocalWorldError) as err:
        wait_for("the CRDs to be Established", lambda: ["queues.scheduling.volcano.sh"], timeout=0.1, every=0.02,
                 error=LocalWorldError, done=lambda left: not left, detail=lambda left: "not yet: " + ", ".join(left))
    assert str(err.value) == ("timed out after 0 s waiting for the CRDs to be Established: "
                              "not yet: queues.scheduling.volcano.sh")
    assert wait_for("a value", Counter(2), timeout=10, every=0.01, error=LocalWorldError) == 2
