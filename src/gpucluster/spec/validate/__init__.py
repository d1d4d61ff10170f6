"""Cross-field validation: rules that need more than one field, each with a path and a hint.

:func:`validate` never stops at the first problem: it returns all of them, errors and warnings, so
a user fixes a spec in one pass. Nothing anywhere is changed before this passes.

One module per section of the spec, each with ``check(spec, collector)``; :func:`validate` runs them in
this order, then the DRA fit (:mod:`gpucluster.spec.dra_fit`) when the pools and the DRA and tenant
sections hold no error.
"""

from __future__ import annotations

from gpucluster.errors import Problem
from gpucluster.spec import dra_fit
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.validate import (
    charts,
    cost,
    dra,
    gpu_operator,
    hosts,
    kubernetes,
    monitoring,
    networking,
    node_pools,
    scheduling,
    tenants,
    topology,
)
from gpucluster.spec.validate.common import Collector


def validate(spec: ClusterSpec) -> list[Problem]:
    c = Collector()
    pools_ok = node_pools.check(spec, c)
    hosts.check(spec, c)
    kubernetes.check(spec, c)
    gpu_operator.check(spec, c)
    dra.check(spec, c)
    scheduling.check(spec, c)
    topology.check(spec, c)
    networking.check(spec, c)
    tenants.check(spec, c, capacity_known=pools_ok)
    cost.check(spec, c)
    monitoring.check(spec, c)
    charts.check(spec, c)
    if pools_ok and not any(p.severity == "error" and p.path.startswith(("dra.", "tenants")) for p in c.problems):
        c.problems += dra_fit.problems(spec)
    return c.problems
