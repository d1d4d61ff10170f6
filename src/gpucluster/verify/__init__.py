"""Verification: check a live cluster (and its hosts) against the spec it was built from.

Cluster checks read a :class:`~gpucluster.verify.snapshot.Snapshot` (a handful of LIST calls) and
compare it with :func:`gpucluster.expected.host_states`; host checks run through testinfra. Every
check can fail: the integration tests inject each fault and see exactly that check fail.
"""

from gpucluster.verify.model import Result, Verdict

__all__ = ["Result", "Verdict"]
