"""Every check verify can emit fails on a fault of its own, proven by running the fault.

- The check ids are read from the source (the first argument of every ``ok``/``fail``/``skip``/
  ``compare``/``warn``/``Result``/``_row`` call under ``src/gpucluster``) and must be the registry
  :data:`gpucluster.verify.checks.CHECKS` (which ``--allow-not-measured`` accepts).
- Every cluster check has a named fault in tests/unit/verify_faults.py: a mutation of a snapshot
  recorded from the local world. Each fault is *run* here: its rows must fail (saying what was expected
  and what was found) and no other row may change verdict. A fault wired to the wrong check fails
  this test (shown below).
- Checks judged outside a cluster snapshot (the host checks, the reconfiguration watchdog, an
  unreachable host, the control-plane certificates read over TLS) are proven by the tests
  docs/verification.md names for them, which must exist.
- docs/verification.md lists every check with its source and the faults that prove it.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from verify_faults import FAULTS, Fault, judge, outcome, problems, read, recorded_rows

from gpucluster.verify.checks import CHECKS

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "verification.md"
#: Functions whose first argument is a check id (``_row`` is tenancy's compare-by-spec helper).
EMITTERS = {"ok", "fail", "skip", "warn", "compare", "Result", "_row"}
#: Checks that no cluster snapshot decides: their proofs are the tests docs/verification.md names.
OUTSIDE_SNAPSHOT = {"mig-reconfig", "sharing-reconfig", "driver-upgrade", "host-reachable",
                    "control-plane-certificates"} | {
    c for c in CHECKS if c.startswith("host-")}
#: Cluster checks whose rows exist only for a spec the recorded local world does not hold (its inventory has no
#: multi-node NVLink pool): proven by the tests docs/verification.md names, which judge snapshots of their own
#: spec, each fault there failing its rows and no other.
OWN_SPEC = {"nvlink-clique"}


@cache
def emitted_ids() -> dict[str, set[str]]:
    """Check id -> the source files that emit it."""
    out: dict[str, set[str]] = {}
    for path in (REPO / "src" / "gpucluster").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            emits = name in EMITTERS or (isinstance(func, ast.IfExp) and {
                getattr(func.body, "id", ""), getattr(func.orelse, "id", "")} <= EMITTERS)
            if emits and re.fullmatch(r"[a-z]+(-[a-z]+)+", first.value):
                out.setdefault(first.value, set()).add(str(path.relative_to(REPO)))
    return out


def proofs() -> dict[str, tuple[str, list[str], list[str]]]:
    """Check id -> (source, fault ids, test references) of its row in the proof table."""
    text = DOC.read_text()
    section = text[text.index("## How the checks are proven"):]
    out: dict[str, tuple[str, list[str], list[str]]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `([a-z-]+)` \| ([^|]+) \| ([^|]+) \| (.+) \|$", line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), re.findall(r"`([a-z0-9-]+)`", m.group(3)),
                               re.findall(r"`([^`]+::[^`]+)`", m.group(4)))
    return out


def test_the_source_scan_finds_the_checks() -> None:
    ids = emitted_ids()
    assert {"node-ready", "dra-slices", "tenant-rbac", "host-containerd", "host-reachable", "gpu-health"} <= set(ids)


def test_the_registry_is_what_the_source_emits() -> None:
    assert sorted(emitted_ids()) == sorted(CHECKS)


def test_every_cluster_check_has_a_named_fault() -> None:
    covered = {check for f in FAULTS.values() for check, _ in f.fails}
    assert sorted(set(CHECKS) - OUTSIDE_SNAPSHOT - OWN_SPEC - covered) == []


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_fails_exactly_its_rows(fault: str) -> None:
    rows, changed = outcome(FAULTS[fault])
    assert judge(fault, FAULTS[fault], rows, changed) == []
    # and the failing rows read as tests/data/verify/rows.json says (a user reads these messages)
    now = read(rows[k] for k in sorted(changed))
    assert now == recorded_rows(fault, now, fault=True), f"fault {fault}: its rows read otherwise than rows.json"


def test_a_cross_wired_fault_fails_the_coverage_check() -> None:
    # The globalDefault fault declared as a queue fault: its own row does not fail, and the row it does
    # fail is one it does not name. Either is enough to fail the check above.
    real = FAULTS["priority-class-made-global-default"]
    wired = {"cross-wired": Fault(real.mutate, frozenset({("tenant-queue", "tenants/inference")}), real.base)}
    assert problems(wired) == [
        "cross-wired: tenant-queue[tenants/inference] did not fail (pass)",
        "cross-wired: priority-classes[priorityclass/notebooks] changed too (pass -> fail)",
    ]
    # and a fault whose mutation breaks nothing cannot stand in for a check either
    inert = {"inert": Fault(lambda s: None, frozenset({("priority-classes", "priorityclass/notebooks")}))}
    assert problems(inert) == ["inert: priority-classes[priorityclass/notebooks] did not fail (pass)"]


def test_the_doc_lists_every_check_with_its_source_and_proof() -> None:
    table = proofs()
    assert sorted(table) == sorted(CHECKS), "docs/verification.md's proof table must list every check once"
    problems_: list[str] = []
    for check, (source, faults, refs) in table.items():
        if not source or source == "-":
            problems_.append(f"{check}: no source")
        for name in faults:
            if name not in FAULTS:
                problems_.append(f"{check}: fault {name} is not in tests/unit/verify_faults.py")
            elif check not in {c for c, _ in FAULTS[name].fails}:
                problems_.append(f"{check}: fault {name} fails {sorted(FAULTS[name].fails)}, not {check}")
        if check not in OUTSIDE_SNAPSHOT | OWN_SPEC and not faults:
            problems_.append(f"{check}: no named fault")
        if check in OUTSIDE_SNAPSHOT | OWN_SPEC and not refs:
            problems_.append(f"{check}: no test named")
        for ref in refs:
            path, _, rest = ref.partition("::")
            name = rest.partition("[")[0]
            file = REPO / path
            if not file.is_file():
                problems_.append(f"{check}: {path} does not exist")
            elif not re.search(rf"^def {re.escape(name)}\(", file.read_text(), re.M):
                problems_.append(f"{check}: no test {name} in {path}")
    named = {f for _, faults, _ in table.values() for f in faults}
    problems_ += [f"fault {f} is in no row of the doc's proof table" for f in sorted(set(FAULTS) - named)]
    assert problems_ == []


def test_the_checklist_names_only_checks_that_exist() -> None:
    from gpucluster.verify.checklist import CHECKLIST

    assert sorted({c for _, ids, _ in CHECKLIST for c in ids} - set(CHECKS)) == []


def test_the_checklist_counts_network_policy_as_enforced_only_by_the_enforcer_row() -> None:
    """A NetworkPolicy object isolates nobody: the object checks never stand for enforcement."""
    from gpucluster.verify.checklist import CHECKLIST

    points = {point: checks for point, checks, _ in CHECKLIST}
    enforced = [p for p in points if "enforced" in p.lower() and "networkpolicy" in p.lower()]
    assert len(enforced) == 1
    assert points[enforced[0]] == ["network-policy-enforcer"]
    assert all("network-policy-enforcer" not in checks for p, checks in points.items() if p != enforced[0])
