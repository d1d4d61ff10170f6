"""Host checks through pytest-testinfra, one test per host and check family.

The hosts come from testinfra's ``--hosts`` (``ansible://all`` with ``--ansible-inventory`` reads them
from the gpucluster inventory plugin; ``ssh://``, ``podman://`` also work); each one is matched to the
spec host of the same name.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.verify.hosts import HOST_CHECKS, host_checks
from gpucluster.verify.model import Verdict

_RESULTS: dict[str, list] = {}


def _results(spec: Any, host: Any) -> tuple[str, list]:
    """All host check rows for one testinfra host, computed once per host."""
    name = host.backend.get_hostname()
    if name not in _RESULTS:
        known = {h.name for h in spec.hosts}
        if name not in known:
            pytest.skip(f"{name} is not a host of cluster {spec.metadata.name}")
        _RESULTS[name] = list(host_checks(spec, spec.host(name), host))
    return name, _RESULTS[name]


@pytest.mark.parametrize("check", HOST_CHECKS)
def test_host(host: Any, gpucluster_spec: Any, check: str) -> None:
    name, results = _results(gpucluster_spec, host)
    rows = [r for r in results if r.check == check]
    if not rows:
        pytest.skip(f"{check} does not apply to {name} (its pool has no GPU or no RDMA)")
    failed = [r for r in rows if r.verdict is Verdict.failed]
    assert not failed, "; ".join(f"{r.subject}: expected {r.expected}, actual {r.actual}" for r in failed)
    if all(r.verdict is Verdict.skipped for r in rows):
        pytest.skip("; ".join(sorted({r.reason for r in rows})))
