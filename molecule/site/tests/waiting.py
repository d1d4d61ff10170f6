"""Waiting for what hosts do on their own timers (keepalived, the kubelet, the runtime's log shipping)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(what: str, condition: Callable[[], T], timeout: float = 120.0, every: float = 1.0) -> T:
    """Poll until ``condition()`` returns something truthy and return it; fail the test naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return result
