"""Host checks through pytest-testinfra, one test per host and check family.

The hosts come from testinfra's ``--hosts`` (``ansible://all`` with ``--ansible-inventory`` reads them
from the gpucluster inventory plugin; ``ssh://``, ``podman://`` also work); each one is matched to the
spec host with that name or address. A host the spec does not know fails: checking it against
nothing would pass by accident.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.verify.hosts import HOST_CHECKS, host_checks
from gpucluster.verify.model import Verdict
from gpucluster.verify.pytest_plugin import unmeasured

_RESULTS: dict[str, list] = {}


def _results(spec: Any, host: Any) -> tuple[str, list]:
    """All host check rows for one testinfra host, computed once per host."""
    target = host.backend.get_hostname()
    match = next((h for h in spec.hosts if target in (h.name, h.address)), None)
    if match is None:
        pytest.fail(f"{target} is neither the name nor the address of a host of cluster "
                    f"{spec.metadata.name}; check the --hosts list against the spec")
    if match.name not in _RESULTS:
        _RESULTS[match.name] = list(host_checks(spec, match, host))
    return match.name, _RESULTS[match.name]


@pytest.mark.parametrize("check", HOST_CHECKS)
def test_host(host: Any, gpucluster_spec: Any, check: str, pytestconfig: pytest.Config) -> None:
    name, results = _results(gpucluster_spec, host)
    rows = [r for r in results if r.check == check]
    if not rows:
        pytest.skip(f"{check} does not apply to {name} (its pool has no GPU or no RDMA)")
    failed = [r for r in rows if r.verdict is Verdict.failed]
    assert not failed, "; ".join(f"{r.subject}: expected {r.expected}, actual {r.actual}" for r in failed)
    if any(r.verdict is Verdict.skipped for r in rows):
        unmeasured(pytestconfig, check, "; ".join(sorted({r.reason for r in rows if r.verdict is Verdict.skipped})))
