"""Polling a condition until a deadline: the one loop for "ask again every few seconds, up to N seconds".

:func:`poll` evaluates ``step()`` until ``done(value)`` holds or the deadline passes, and returns the last
value: the caller judges it (a list of what is still pending, a verdict). :func:`wait_for` is the same
with a timeout error that says what was waited for, for how long and what was last seen. A step is
always evaluated once more at the deadline, so a condition met during the last pause is not missed.

A poll waits for a condition someone else brings about (a server answering, an object's status, a
process ending); it is never a pause standing in for an event the code could observe instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gpucluster.errors import GpuclusterError

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    """A point on the monotonic clock, for several waits that share one budget (``Deadline.after(300)``)."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.at - time.monotonic())


def poll(step: Callable[[], T], *, timeout: float | Deadline, every: float,
         done: Callable[[T], bool] = bool) -> T:
    """Evaluate ``step`` every ``every`` seconds until ``done`` holds for its value or the deadline passes.

    ``timeout`` is seconds from now or a shared :class:`Deadline`. Returns the last value (``done`` may
    not hold for it: the deadline passed). Exceptions from ``step`` propagate at once.
    """
    deadline = timeout if isinstance(timeout, Deadline) else Deadline.after(timeout)
    while True:
        value = step()
        left = deadline.left()
        if done(value) or left <= 0:
            return value
        time.sleep(min(every, left))


def wait_for(what: str, step: Callable[[], T], *, timeout: float | Deadline, every: float,
             error: type[GpuclusterError], done: Callable[[T], bool] = bool,
             detail: Callable[[T], str] = repr) -> T:
    """:func:`poll`, raising ``error`` when the deadline passes first; returns the value that was ``done``.

    The message: ``timed out after N s waiting for WHAT: DETAIL`` (``detail`` of the last value).
    """
    value = poll(step, timeout=timeout, every=every, done=done)
    if not done(value):
        seconds = timeout.seconds if isinstance(timeout, Deadline) else timeout
        raise error(f"timed out after {seconds:.0f} s waiting for {what}: {detail(value)}")
    return value
