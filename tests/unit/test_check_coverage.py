"""Every check verify can emit has a test in which that check fails on its own fault.

The check ids are read from the source (the first argument of every ``ok``/``fail``/``skip``/
``compare``/``Result`` call under ``src/gpucluster``); the proofs from the table in
docs/verification.md ("How the checks are proven"). Each id needs a row, and each reference in a row
must name a test that exists (``path::test_name`` with, for a parametrized fault, its id in the file)
and a file that mentions the check id.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "verification.md"
#: Functions whose first argument is a check id (``_row`` is tenancy's compare-by-spec helper).
EMITTERS = {"ok", "fail", "skip", "compare", "Result", "_row"}


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


def proofs() -> dict[str, list[str]]:
    """Check id -> the test references of its row in the proof table."""
    text = DOC.read_text()
    section = text[text.index("## How the checks are proven"):]
    out: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `([a-z-]+)` \| [^|]+ \| (.+) \|$", line)
        if m:
            out[m.group(1)] = re.findall(r"`([^`]+::[^`]+)`", m.group(2))
    return out


def test_the_source_scan_finds_the_checks() -> None:
    ids = emitted_ids()
    assert {"node-ready", "dra-slices", "tenant-rbac", "host-containerd", "host-reachable"} <= set(ids)
    assert len(ids) >= 30


def test_every_check_has_a_failing_test() -> None:
    missing = sorted(set(emitted_ids()) - {c for c, refs in proofs().items() if refs})
    assert missing == [], f"checks without a proof row in docs/verification.md: {missing}"


def test_no_proof_row_names_a_check_the_code_no_longer_emits() -> None:
    assert sorted(set(proofs()) - set(emitted_ids())) == []


def test_every_reference_names_a_real_test_that_mentions_its_check() -> None:
    problems = []
    for check, refs in proofs().items():
        for ref in refs:
            path, _, rest = ref.partition("::")
            name, _, param = rest.partition("[")
            file = REPO / path
            if not file.is_file():
                problems.append(f"{check}: {path} does not exist")
                continue
            text = file.read_text()
            if not re.search(rf"^def {re.escape(name)}\(", text, re.M):
                problems.append(f"{check}: no test {name} in {path}")
            if param and f'"{param.rstrip("]")}"' not in text:
                problems.append(f"{check}: {path} has no fault id {param.rstrip(']')!r}")
            if check not in text:
                problems.append(f"{check}: {path} never mentions the check")
    assert problems == []


def test_every_check_the_checklist_names_is_emitted() -> None:
    from gpucluster.verify.checklist import CHECKLIST

    named = {c for _, checks, _ in CHECKLIST for c in checks}
    assert sorted(named - set(emitted_ids())) == []


def test_the_checklist_counts_network_policy_as_enforced_only_by_the_enforcer_row() -> None:
    """A NetworkPolicy object isolates nobody: the object checks never stand for enforcement."""
    from gpucluster.verify.checklist import CHECKLIST

    points = {point: checks for point, checks, _ in CHECKLIST}
    enforced = [p for p in points if "enforced" in p.lower() and "networkpolicy" in p.lower()]
    assert len(enforced) == 1
    assert points[enforced[0]] == ["network-policy-enforcer"]
    assert all("network-policy-enforcer" not in checks for p, checks in points.items() if p != enforced[0])
