"""pytest plugin (entry point ``pytest11``): run ``gpucluster verify``'s checks as plain pytest tests.

    pytest --pyargs gpucluster.verify.suite.test_cluster --gpucluster-inventory inventories/lab \\
        --gpucluster-kubeconfig ~/.kube/lab --junitxml reports/verify.xml
    pytest --pyargs gpucluster.verify.suite.test_hosts --gpucluster-inventory inventories/lab \\
        --hosts ansible://all --ansible-inventory inventories/lab

One test per cluster check row (``check[subject]``) and one per host check family and host, so a CI
report shows exactly what failed. The options do nothing unless the suite is collected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import GpuclusterError

_SPEC = pytest.StashKey[Any]()
_CLUSTER = pytest.StashKey[list]()
_ALLOWED = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpucluster", "gpucluster verify suite (gpucluster.verify.suite)")
    group.addoption("--gpucluster-inventory", default=os.environ.get("GPUCLUSTER_INVENTORY"),
                    help="Inventory folder with cluster.yaml (default: $GPUCLUSTER_INVENTORY).")
    group.addoption("--gpucluster-kubeconfig", default=None,
                    help="Kubeconfig of the cluster (default: the local world's for the local inventory, "
                         "else $KUBECONFIG).")
    group.addoption("--gpucluster-context", default=None, help="Kubeconfig context.")
    group.addoption("--gpucluster-metrics-url", action="append", default=[],
                    help="Also read GPU health from this DCGM exporter or federate endpoint (repeatable).")
    group.addoption("--gpucluster-allow-not-measured", action="append", default=[], metavar="CHECK[,CHECK...]",
                    help="Rows of these checks that could not be measured are skipped instead of failed "
                         "(repeatable; the local inventory adds the local world's fixed list).")


def allowed(config: pytest.Config) -> dict[str, str]:
    """Checks whose unmeasured rows are skipped, with who allowed them (as `gpucluster verify` decides)."""
    __tracebackhide__ = True
    if _ALLOWED not in config.stash:
        from gpucluster import inventory
        from gpucluster.verify import checks

        problem = ""
        try:
            user = checks.parse(config.getoption("--gpucluster-allow-not-measured"),
                                "--gpucluster-allow-not-measured")
            spec = spec_of(config)
            config.stash[_ALLOWED] = checks.allowed(user, local_world=inventory.is_local(spec), spec=spec)
        except GpuclusterError as err:
            problem = str(err)
        if problem:
            _stop(problem)
    return config.stash[_ALLOWED]


def unmeasured(config: pytest.Config, check: str, reason: str) -> None:
    """A row of ``check`` that could not be measured: a failure, or a skip when the check is allowed."""
    __tracebackhide__ = True
    why = allowed(config).get(check)
    if why:
        pytest.skip(f"not measured ({why}): {reason}")
    pytest.fail(f"not measured: {reason} (--gpucluster-allow-not-measured {check} accepts it)")


def _stop(message: str) -> None:
    """Bad input stops collection with one line naming the problem and exit code 2 (as `gpucluster verify`)."""
    __tracebackhide__ = True
    pytest.exit(f"gpucluster suite: {message}", returncode=2)


def spec_of(config: pytest.Config) -> Any:
    """The validated spec named by --gpucluster-inventory (loaded once); a bad one stops the session."""
    __tracebackhide__ = True
    if _SPEC not in config.stash:
        from gpucluster.spec import load_spec

        inventory = config.getoption("--gpucluster-inventory")
        if not inventory:
            _stop("pass --gpucluster-inventory inventories/<env> (or set GPUCLUSTER_INVENTORY)")
        problem = ""
        try:
            config.stash[_SPEC] = load_spec(Path(inventory))
        except GpuclusterError as err:
            problem = str(err)
        if problem:
            _stop(problem)
    return config.stash[_SPEC]


def cluster_results(config: pytest.Config) -> list:
    """Every row `gpucluster verify` shows without --hosts: one snapshot (its LISTs and the tenant access
    reviews), DCGM metrics, the reconfiguration watchdog's and driver upgrades' rows, and the control-plane
    certificates' row."""
    __tracebackhide__ = True
    if _CLUSTER not in config.stash:
        from gpucluster import inventory
        from gpucluster.verify import certs, cluster, upgrades, watchdog

        spec = spec_of(config)
        inventory_dir = config.getoption("--gpucluster-inventory")
        problem = ""
        try:
            kubeconfig = inventory.kubeconfig_for(spec, config.getoption("--gpucluster-kubeconfig"))
            context = config.getoption("--gpucluster-context")
            # as `gpucluster verify` with its default deadlines: changes in progress are followed first
            followed = watchdog.live_rows(spec, kubeconfig, context, watchdog.DEFAULT_DEADLINE,
                                          upgrades.DEFAULT_DEADLINE)
            local = inventory.is_local(spec)
            snap = cluster.fetch(spec, kubeconfig, context, metrics_urls=config.getoption("--gpucluster-metrics-url"),
                                 simulated=local)
            config.stash[_CLUSTER] = (cluster.run(spec, snap, charts_reachable=not local, simulated=local) + followed
                                      + certs.rows(kubeconfig, context, fix=certs.fix_for(spec, inventory_dir)))
        except GpuclusterError as err:
            problem = str(err)
        if problem:
            _stop(problem)
    return config.stash[_CLUSTER]


@pytest.fixture(scope="session")
def gpucluster_spec(pytestconfig: pytest.Config) -> Any:
    """The cluster spec the suite checks against."""
    return spec_of(pytestconfig)
