"""addons.side_by_side: the add-ons' API-server-only steps run at once, and none is still running on an error."""

from __future__ import annotations

import threading

import pytest

from gpucluster.addons import side_by_side


def test_steps_run_at_once_and_results_come_back_in_order() -> None:
    # Each step waits for all three to have started: run one after the other, the first would time out.
    started = threading.Barrier(3, timeout=5)

    def step(i: int) -> int:
        started.wait()
        return i * 10

    assert side_by_side([lambda i=i: step(i) for i in range(3)]) == [0, 10, 20]


def test_the_first_error_is_raised_only_once_every_step_has_finished() -> None:
    release, finished = threading.Event(), threading.Event()

    def fails() -> None:
        release.set()
        raise RuntimeError("first")

    def slow() -> None:
        release.wait(5)
        finished.wait(0.2)  # still busy when the failure is already known
        finished.set()

    def fails_later() -> None:
        release.wait(5)
        raise ValueError("second")

    with pytest.raises(RuntimeError, match="first"):
        side_by_side([fails, slow, fails_later])
    assert finished.is_set()


def test_one_step_runs_in_the_callers_thread() -> None:
    assert side_by_side([lambda: threading.current_thread()]) == [threading.current_thread()]
