"""The simulator never grades its own homework: it imports nothing from the expectation side.

Verification computes what nodes should show from the spec and the catalog (gpucluster.expected,
gpucluster.devices, gpucluster.spec.capacity) and checks it (gpucluster.verify). The GPU simulator
publishes what NVIDIA's agents would, from upstream code and facts. If any simulator module reached
any of those, directly or through another module, a wrong number could be the same on both sides.
The live proof that a deliberate expectation error is caught is in
tests/integration/test_verify_live.py (test_a_wrong_expectation_fails_verify).
"""

from __future__ import annotations

from test_architecture import GRAPH

EXPECTATION_SIDE = ("gpucluster.expected", "gpucluster.devices", "gpucluster.spec.capacity", "gpucluster.verify")


def reachable(start: str) -> dict[str, str]:
    """Every module ``start`` imports, directly or not, with the module that imports it."""
    seen: dict[str, str] = {}
    stack = [start]
    while stack:
        module = stack.pop()
        for target in GRAPH[module]:
            if target not in seen and target != start:
                seen[target] = module
                stack.append(target)
    return seen


def chain(seen: dict[str, str], module: str, start: str) -> str:
    path = [module]
    while path[-1] != start and path[-1] in seen:
        path.append(seen[path[-1]])
    return " <- ".join(path)


def test_no_simulator_module_reaches_the_expectation_side() -> None:
    simulator = [m for m in GRAPH if m.startswith(("gpucluster.simulator", "gpucluster.addons.gpu_simulator"))]
    assert len(simulator) > 10
    bad = []
    for module in simulator:
        seen = reachable(module)
        bad += [chain(seen, m, module) for m in seen if m.startswith(EXPECTATION_SIDE)]
    assert bad == []


def test_the_check_would_see_a_forbidden_import() -> None:
    # verify reaches expected and devices: the same walk finds them there.
    seen = reachable("gpucluster.verify.cluster")
    assert "gpucluster.expected" in seen and "gpucluster.devices" in seen
