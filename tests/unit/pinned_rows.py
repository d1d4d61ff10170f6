"""Pin every row a scenario test produces, as a user reads it, in tests/data/verify/pinned.json.

A scenario test asserts what matters about its rows; :func:`pin` also holds the rest (each row's expected,
actual and reason, and any extra text such as the commands a host check ran) to what was reviewed, so a
changed message or command fails the test that produced it. ``GPUCLUSTER_WRITE_ROWS=1`` rewrites the
file; review the diff. Keys are the test's id and the call's number within it (reset before each test by
the autouse fixture in tests/unit/conftest.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

PINNED = Path(__file__).resolve().parents[1] / "data" / "verify" / "pinned.json"
_calls: dict[str, int] = {}


def reset() -> None:
    _calls.clear()


@cache
def _pinned() -> dict[str, Any]:
    return json.loads(PINNED.read_text()) if PINNED.exists() else {}


def pin(rows: Iterable[Any], extra: Any = None) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    _calls[test] = _calls.get(test, 0) + 1
    key = f"{test}#{_calls[test]}"
    now: Any = [[r.check, r.subject, r.verdict.value, r.expected, r.actual, r.reason] for r in rows]
    if extra is not None:
        now = {"rows": now, "extra": extra}
    if os.environ.get("GPUCLUSTER_WRITE_ROWS") == "1":
        data = json.loads(PINNED.read_text()) if PINNED.exists() else {}
        data[key] = now
        PINNED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    assert _pinned().get(key) == now, f"{key}: the rows read otherwise than tests/data/verify/pinned.json"
