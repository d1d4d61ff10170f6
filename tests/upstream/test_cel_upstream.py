"""DeviceClass CEL and quantities against Kubernetes' own code: the dra-cel tool runs the DRA library's
selector evaluation (k8s.io/dynamic-resource-allocation v0.37.2 ``cel.NewCache(...).GetOrCompile`` and
``DeviceMatches``, as the scheduler's allocator calls them) and k8s.io/apimachinery's ``ParseQuantity``.

The corpus: every selector gpucluster renders (collected from the render of inventories/local,
inventories/lab and every spec under tests/data, plus the selectors validation evaluates for the DRA
chart's own classes) and hand-written edge cases, each against the devices the GPU simulator publishes
and the devices validation predicts, plus devices made to fail (a missing attribute, a version that is not
semver). Ours must give the same verdict as Kubernetes for every pair: match, no match, or error.
"""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpucluster import cel
from gpucluster.quantity import QuantityError, parse_quantity
from gpucluster.render import render
from gpucluster.simulator import nvml
from gpucluster.simulator.agents import dra_plugin
from gpucluster.spec import dra_fit, load_spec
from gpucluster.spec.model import DeviceClass
from gpucluster.spec.selectors import device_class_cel
from gpucluster.toolchain.versions import DRA_LIBRARY, KUBERNETES
from gpucluster.toolchain.versions import wrappers_root as tools_root

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "inventories" / "local", REPO / "inventories" / "lab",
         *sorted(p.parent for p in (REPO / "tests" / "data").glob("*/cluster.yaml"))]
DRIVER = dra_plugin.DRIVER
A = f"device.attributes['{DRIVER}']"
C = f"device.capacity['{DRIVER}']"

#: Hand-written edge cases: what Kubernetes does with each is what the oracle says, not this list.
EDGE_CASES = [
    # a missing attribute: an error (the allocation fails), unless guarded
    f"{A}.profile == '1g.10gb'",
    f"has({A}.profile) && {A}.profile == '1g.10gb'",
    f"{A}.?profile.orValue('') == '1g.10gb'",
    f"{A}.uuid.startsWith('GPU-')",
    f"{A}.missing == 'x' || true",                    # CEL's || is commutative over errors
    f"false && {A}.missing == 'x'",
    f"{A}.type == 'mig' && {A}.profile == '1g.10gb'",   # the type test first keeps whole GPUs away
    "device.attributes['example.com'].x == 1",          # an unknown domain is an empty map
    "'x' in device.attributes['example.com']",
    "has(device.attributes['example.com'].x)",
    # wrong types
    f"{A}.productName == 1",
    f"{A}.productName > 1",
    "device.driver == 1",
    f"{C}.memory.compareTo(semver('1.0.0')) >= 0",
    f"{A}.productName",
    "device.driver",
    "device.nope == 'x'",
    "device.driver ==",
    # quantities: exponents, fractions, arithmetic, conversions
    f"{C}.memory.compareTo(quantity('80Gi')) >= 0",
    f"{C}.memory.compareTo(quantity('8e10')) >= 0",
    f"{C}.memory.compareTo(quantity('1.5Ti')) < 0",
    f"{C}.memory.isGreaterThan(quantity('79.6Gi'))",
    f"{C}.memory.isLessThan(quantity('24e9'))",
    f"{C}.memory.asApproximateFloat() > 8.0e10",
    f"{C}.memory.add(quantity('1Gi')).compareTo(quantity('81Gi')) == 0",
    f"{C}.memory.sub(1).isLessThan({C}.memory)",
    f"sign({C}.memory) == 1",
    f"{C}.memory.sign() == 1",                          # sign is a global function: a compile error
    f"{C}.memory == quantity('85899345920')",
    f"{C}.memory == quantity('80Gi')",
    f"{C}.memory.compareTo(quantity('80GB')) >= 0",    # not a quantity: a runtime error
    "isQuantity('8e10') && isQuantity('+1.5Gi') && !isQuantity('80GB') && !isQuantity('1K')",
    "sign(quantity('-1Gi')) == -1 && sign(quantity('0')) == 0",
    "quantity('1e3') == quantity('1k') && quantity('0.5') == quantity('500m')",
    f"{C}.nope.compareTo(quantity('1')) > 0",
    # versions
    f"{A}.cudaComputeCapability.compareTo(semver('8.9.0')) >= 0",
    f"{A}.cudaComputeCapability.isGreaterThan(semver('9.0.0'))",
    f"{A}.cudaComputeCapability.isLessThan(semver('9.0.0-rc.1'))",
    f"{A}.cudaComputeCapability.major() >= 9 && {A}.cudaComputeCapability.minor() == 0",
    f"{A}.driverVersion.compareTo(semver('580.0.0')) >= 0",
    f"{A}.driverVersion.patch() == 5",
    f"{A}.cudaComputeCapability == semver('9.0.0')",
    f"{A}.cudaComputeCapability.compareTo(semver('9.0')) >= 0",     # not semver: a runtime error
    f"{A}.cudaComputeCapability.compareTo(semver('v9.0', true)) >= 0",
    "semver('1.0.0-alpha').isLessThan(semver('1.0.0'))",
    "semver('1.0.0-alpha.1').compareTo(semver('1.0.0-alpha.beta')) < 0",
    "semver('1.0.0-2').compareTo(semver('1.0.0-10')) < 0",
    "semver('1.0.0+build.1') == semver('1.0.0')",
    "isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true) && !isSemver('01.2.3')",
    "semver('01.2.3', true).major() == 1",
    f"{A}.productName.compareTo(semver('1.0.0')) >= 0",
    # string functions
    f"{A}.productName.lowerAscii().contains('h100')",
    f"{A}.productName.startsWith('NVIDIA') && {A}.productName.endsWith('GB')",
    f"{A}.productName.matches('^NVIDIA (H|A)100')",
    f"{A}.productName.upperAscii().split(' ')[0] == 'NVIDIA'",
    f"size({A}.productName) > 10",
    f"{A}.productName.indexOf('L4') >= 0",
    f"{A}.productName.substring(0, 6) == 'NVIDIA'",
    f"{A}.productName.replace('NVIDIA ', '') in ['H100 80GB HBM3', 'L4']",
    f"{A}.architecture in ['Hopper', 'Ada Lovelace']",
    f"{A}.brand.trim() == 'Nvidia'",
    # the rest of the environment
    f"cel.bind(gpu, {A}, gpu.type == 'gpu' && gpu.productName.contains('H100'))",
    "device.allowMultipleAllocations == false",
    "device.driver == 'gpu.nvidia.com' && device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:')",
    "true",
]

#: Kubernetes functions this evaluator does not carry: reported as not evaluated, never compared.
UNSUPPORTED = ["isURL('https://example.com')", "ip('10.0.0.1').family() == 4", f"{A}.productName.find('H1') == 'H1'",
               "[1, 2].isSorted()", "sets.contains([1, 2], [1])",
               # upstream answers these from the parsed quantity's internal form (AsInt64), not its value
               f"{C}.memory.isInteger()", "quantity('1.5Ti').asInteger() > 0"]


def rendered_selectors() -> list[str]:
    """Every CEL selector in a rendered resource.k8s.io object, validation's chart classes, and the spec
    renderer with every selector field set (no shipped spec sets minComputeCapability)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("cel"), dict) and "expression" in node["cel"]:
                found.add(node["cel"]["expression"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for folder in SPECS:
        spec = load_spec(folder / "cluster.yaml")
        for o in render(spec).objects():
            if str(o.get("apiVersion", "")).startswith("resource.k8s.io/"):
                walk(o)
        found.update(dra_fit.class_expressions(spec).values())
    every_field = {"minMemory": "40Gi", "productNameContains": "H100", "architecture": "Hopper",
                   "minComputeCapability": "9.0", "cel": [f"{A}.brand == 'Nvidia'"]}
    found.add(device_class_cel(DeviceClass.model_validate({"name": "all", "selector": every_field})))
    found.add(device_class_cel(DeviceClass.model_validate(
        {"name": "all-mig", "type": "mig", "selector": {**every_field, "migProfile": "1g.10gb"}})))
    return sorted(found)


def devices() -> list[tuple[str, dict]]:
    """(driver, device entry): what the simulator publishes, what validation predicts, and made-up faults."""
    out: list[tuple[str, dict]] = []
    driver_version = "580.95.05"

    def published(model: str, layout: tuple[tuple[str, ...], ...], dynamic: bool = False) -> list[dict]:
        parts = dra_plugin.slices("c", "node-1", nvml.model(model), layout, driver_version=driver_version,
                                  cuda_driver_version=nvml.cuda_driver_version(driver_version), missing=set(),
                                  dynamic_mig=dynamic)
        return [d for part in parts for d in part.get("devices", [])]

    sim = (published("H100-SXM5-80GB", ((), ("1g.10gb", "3g.40gb"))) + published("L4", ((),))
           + published("A100-80GB", ((),), dynamic=True)[:4])
    out += [(DRIVER, d) for d in sim]
    for folder in SPECS[:2]:
        for pd in dra_fit.published(load_spec(folder / "cluster.yaml")):
            out += [(DRIVER, entry) for _, entry in pd.devices[:2]]
    whole = next(d for d in sim if d["name"] == "gpu-0")
    out.append(("rdma.example.com", {"name": "nic-0", "attributes": {"type": {"string": "nic"}},
                                     "capacity": {"bandwidth": {"value": "400G"}}}))
    out.append((DRIVER, {**whole, "name": "no-product", "attributes": {
        k: v for k, v in whole["attributes"].items() if k != "productName"}}))
    out.append((DRIVER, {**whole, "name": "bad-version", "attributes": {
        **whole["attributes"], "driverVersion": {"version": "580.95"}}}))
    out.append((DRIVER, {"name": "qualified", "attributes": {
        f"{DRIVER}/type": {"string": "gpu"}, f"{DRIVER}/productName": {"string": "NVIDIA L4"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"}},
        "capacity": {f"{DRIVER}/memory": {"value": "23034Mi"}}}))
    return out


def ask(tool: Path, request: dict) -> dict:
    proc = subprocess.run([str(tool)], input=json.dumps(request), capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ours(expr: str, driver: str, device: dict) -> str:
    try:
        program = cel.compile_expr(expr)
    except cel.CompileError:
        return "error"
    return cel.evaluate(program, driver, device).verdict


def test_the_oracle_builds_the_library_of_the_kubernetes_pin() -> None:
    gomod = (tools_root() / "dra-cel" / "go.mod").read_text()
    assert DRA_LIBRARY == "v0." + KUBERNETES.split(".", 1)[1]
    assert f"\tk8s.io/dynamic-resource-allocation {DRA_LIBRARY}\n" in gomod


def test_the_corpus_holds_every_rendered_selector() -> None:
    selectors = rendered_selectors()
    # The three chart classes, the extended-resource class, the spec classes of lab and tests/data/dra, and
    # every selector field.
    assert len(selectors) >= 12, selectors
    assert any("compareTo(quantity(" in s for s in selectors) and any("semver(" in s for s in selectors)


def test_every_selector_and_edge_case_agrees_with_kubernetes(dra_cel: Path) -> None:
    expressions = rendered_selectors() + EDGE_CASES
    devs = devices()
    answer = ask(dra_cel, {"features": {"consumableCapacity": True},
                           "expressions": expressions,
                           "devices": [{"driver": d, "device": dev} for d, dev in devs]})["results"]
    disagree = []
    seen = {"match": 0, "no match": 0, "error": 0}
    for expr, row in zip(expressions, answer, strict=True):
        for (driver, dev), theirs in zip(devs, row, strict=True):
            mine = ours(expr, driver, dev)
            seen[theirs["result"]] += 1
            if mine != theirs["result"]:
                disagree.append(f"{expr!r} on {driver}/{dev['name']}: Kubernetes {theirs['result']} "
                                f"({theirs['class']} {theirs['message'][:120]}), ours {mine}")
    assert disagree == [], "\n".join(disagree)
    assert all(seen.values()), seen  # the corpus exercises all three verdicts


@pytest.mark.parametrize("expr", UNSUPPORTED)
def test_functions_we_do_not_carry_are_unsupported_never_a_verdict(expr: str) -> None:
    with pytest.raises(cel.Unsupported, match="a Kubernetes CEL function gpucluster does not evaluate"):
        cel.compile_expr(expr)


QUANTITIES = ["80Gi", "8e10", "8E10", "1.5Ti", "-1.5Gi", "+2", ".5Gi", "5.Gi", "00012", "0.1n", "-0.1n",
              "1.0000000001", "500m", "1E", "1e+3", "1e-3", "1e-10", "100000000000000000000Ei",
              "12345678901234567890123", "1e4294967296", "-", "k", "0", "0Ei", "", " 1", "1.5.5", "1 Gi",
              "1GB", "1K", "1ki", "1e", "1eE5", "1Ki5", "Ei", "e-10", "23034Mi", "79.6Gi", "400G"]


def test_quantities_parse_as_kubernetes_parses_them(dra_cel: Path) -> None:
    answer = ask(dra_cel, {"expressions": [], "devices": [], "quantities": QUANTITIES})["quantities"]
    disagree = []
    for text, theirs in zip(QUANTITIES, answer, strict=True):
        try:
            mine: Decimal | str = parse_quantity(text)
        except QuantityError as err:
            mine = str(err)
        if "error" in theirs:
            ok = isinstance(mine, str) and mine.endswith(": " + theirs["error"])
        else:
            ok = isinstance(mine, Decimal) and mine == Decimal(theirs["value"])
        if not ok:
            disagree.append(f"{text!r}: Kubernetes {theirs}, ours {mine}")
    assert disagree == [], "\n".join(disagree)
