"""The package's shape: no import cycles, no private names across modules, one label prefix, docs that name real paths.

The import graph is read from the source (every ``import`` statement, function-local ones included),
at two levels: modules, and the units directly under ``gpucluster`` (a subpackage or a top-level
module). Either graph having a cycle fails, naming the cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "gpucluster"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(name: str) -> set[str]:
    """gpucluster modules ``name`` imports (``from pkg import mod`` counts as the module when it is one)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("gpucluster")}
        elif isinstance(node, ast.ImportFrom):
            target = resolve(name, path.name == "__init__.py", node)
            if not target.startswith("gpucluster"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def unit(module: str) -> str:
    """The unit directly under gpucluster: ``gpucluster.spec.model`` -> ``spec``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gpucluster"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each a cycle's members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_function_local_imports() -> None:
    # flow imports the stacks' engine inside functions only; the graph must still hold that edge
    assert "gpucluster.pulumi.engine" in GRAPH["gpucluster.flow"]


def test_no_import_cycle_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_no_import_cycle_between_packages() -> None:
    units: dict[str, set[str]] = {}
    for src, targets in GRAPH.items():
        units.setdefault(unit(src), set()).update(unit(t) for t in targets if unit(t) != unit(src))
    units.pop("gpucluster", None)  # the package root holds only the version string
    assert cycles(units) == [], {u: sorted(t) for u, t in units.items()}


def test_cycle_detection_finds_a_planted_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_a_private_name_from_another_module() -> None:
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and resolve(name, path.name == "__init__.py", node).startswith(
                    "gpucluster"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{name}: from {node.module} import {a.name}")
                    aliases.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("gpucluster")}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{name}: {node.value.id}.{node.attr}")
    assert found == []


def test_our_label_keys_use_one_prefix() -> None:
    """Every key of ours is gpucluster.dev/...; the old .io spelling of our prefix must not come back."""
    old = "gpucluster" + ".io/"
    hits = []
    for root in ("src", "roles", "playbooks", "plugins", "inventories", "docs", "tests", "molecule", "stacks"):
        for path in (REPO / root).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".yml", ".yaml", ".md", ".j2", ".toml", ".json"):
                if old in path.read_text(errors="replace"):
                    hits.append(str(path.relative_to(REPO)))
    assert hits == []


def test_every_label_constant_is_one_of_ours_or_an_upstream_domain() -> None:
    from gpucluster import labels

    keys = [v for k, v in vars(labels).items() if k.isupper() and isinstance(v, str) and "/" in v]
    ours = [k for k in keys if "gpucluster" in k]
    assert ours and all(k.startswith(labels.OURS) for k in ours)


PATH_IN_BACKTICKS = re.compile(r"`((?:src|tests|docs|roles|playbooks|molecule|inventories|stacks|scripts|tools|"
                               r"benchmarks|plugins|templates)/[A-Za-z0-9_./<>*-]*)`")


DOCS = ["README.md", *[str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md"))]]


@pytest.mark.parametrize("doc", DOCS)
def test_docs_name_only_paths_that_exist(doc: str) -> None:
    missing = []
    for raw in PATH_IN_BACKTICKS.findall((REPO / doc).read_text()):
        path = raw.rstrip(".")
        if "<" in path or "*" in path:  # a pattern such as inventories/<env>/cluster.yaml: check its fixed prefix
            prefix = re.split(r"[<*]", path)[0].rstrip("/")
            if prefix and not (REPO / prefix).exists():
                missing.append(raw)
            continue
        if not (REPO / path.split("::")[0].split("#")[0]).exists():
            missing.append(raw)
    assert missing == [], f"{doc} names paths that do not exist"


def test_no_test_imports_from_a_conftest() -> None:
    # conftest modules share one module name per folder: importing from one picks whichever was loaded
    # first (it broke two integration modules once). Shared helpers live in uniquely named modules.
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                 if re.search(r"^\s*(from conftest import|import conftest)", p.read_text(), re.M)]
    assert offenders == []
