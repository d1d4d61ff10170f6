"""The package's shape: the layers of docs/architecture.md as import-linter contracts, no private names across
modules, one label prefix, docs and docstrings that name real paths and modules.

The contracts live in pyproject.toml (``[tool.importlinter]``: the layers, the simulator's independence
from the expectation side, a pure spec and render core, no import cycle at any level); ``lint-imports``
checks them from the command line and :func:`test_the_import_contracts_hold` here. Import-linter reads
every ``import`` statement, those inside functions included.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "gpucluster"
PYPROJECT = REPO / "pyproject.toml"


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


# -- the import contracts ------------------------------------------------------------------------------

CONTRACTS = {c["id"]: c["name"] for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]}

#: Checks every contract of pyproject.toml (argv[1]) against each copy of the package (argv[2:], folders that
#: hold a ``gpucluster``), one after the other in one interpreter: import-linter finds the package on
#: ``sys.path`` without importing it. Prints {copy: lint-imports' report} (one wide line per contract).
CHECK = """
import contextlib, importlib, io, json, sys
from importlinter.cli import lint_imports

reports = {}
for src in sys.argv[2:]:
    sys.path.insert(0, src)
    importlib.invalidate_caches()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True)
    sys.path.remove(src)
    reports[src] = [code, out.getvalue()]
print(json.dumps(reports))
"""


def verdicts(report: str) -> dict[str, bool]:
    """{contract id: kept} from a lint-imports report."""
    out = {}
    for cid, name in CONTRACTS.items():
        kept, broken = f"{name} KEPT" in report, f"{name} BROKEN" in report
        assert kept != broken, f"contract {cid!r} is neither kept nor broken in:\n{report}"
        out[cid] = kept
    return out


def test_the_import_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.cli import lint_imports

    exit_code = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert exit_code == 0, report
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in report


def test_the_contracts_see_function_local_imports() -> None:
    import grimp

    # flow imports the stacks' engine inside functions only; the graph the contracts check holds that edge
    graph = grimp.build_graph("gpucluster", cache_dir=None)
    assert graph.direct_import_exists(importer="gpucluster.flow", imported="gpucluster.pulumi.engine")


#: One planted fault per contract: (file under src/gpucluster, text appended to it). Each breaks its own
#: contract and no other (a fault's test fails for that fault alone).
PLANTED = {
    # the catalog (bottom layer) reaching up to the air-gap image builder, inside a function
    "layers": ("catalog.py", "\n\ndef _planted() -> None:\n    from gpucluster import airgap\n\n    del airgap\n"),
    # a new unit nobody placed in a layer
    "layers-unplaced": ("planted.py", '"""A module no layer names."""\n'),
    "simulator-independence": ("simulator/silicon.py", "\n\nfrom gpucluster import devices  # noqa: E402\n"),
    "pure-core": ("render/common.py", "\n\nfrom gpucluster import kube  # noqa: E402\n"),
    # render.nodes already imports (through gpu_operator) render.common
    "acyclic": ("render/common.py", "\n\nfrom gpucluster.render import nodes  # noqa: E402\n"),
}


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bool]]:
    """Each planted fault on its own copy of the package: {fault: {contract id: kept}}."""
    copies = {}
    for fault, (rel, text) in PLANTED.items():
        src = tmp_path_factory.mktemp(fault) / "src"
        shutil.copytree(PACKAGE, src / "gpucluster", ignore=shutil.ignore_patterns("__pycache__"))
        target = src / "gpucluster" / rel
        target.write_text((target.read_text() if target.exists() else "") + text)
        copies[str(src)] = fault
    done = subprocess.run([sys.executable, "-c", CHECK, str(PYPROJECT), *copies], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "1000"}, timeout=120)  # COLUMNS: one line per contract
    assert done.returncode == 0, done.stderr
    out = {}
    for src, (code, report) in json.loads(done.stdout).items():
        assert code == 1, f"{copies[src]}: lint-imports exited {code}\n{report}"
        out[copies[src]] = verdicts(report)
    return out


@pytest.mark.parametrize("fault", PLANTED)
def test_a_forbidden_import_breaks_its_contract_and_no_other(planted_results, fault: str) -> None:
    broken = sorted(contract for contract, kept in planted_results[fault].items() if not kept)
    assert broken == [fault.removesuffix("-unplaced")], {c: CONTRACTS[c] for c in broken}
    assert set(planted_results[fault]) == set(CONTRACTS)


def test_no_module_imports_a_private_name_from_another_module() -> None:
    found = []
    for name, path in MODULES.items():
        aliases: set[str] = set()
        for node in ast.walk(tree(name)):
            if isinstance(node, ast.ImportFrom) and resolve(name, path.name == "__init__.py", node).startswith(
                    "gpucluster"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{name}: from {node.module} import {a.name}")
                    aliases.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("gpucluster")}
        for node in ast.walk(tree(name)):
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


#: A module of ours named in a docstring (``gpucluster.render.dra_driver``, :mod:`~gpucluster.spec.model`,
#: :func:`gpucluster.render.render`); not a label key (``gpucluster.dev/pool``).
DOTTED = re.compile(r"(?<![\w./-])~?(gpucluster(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w/-])")
#: A path of this repository in a docstring, with or without backticks. ``plugins/`` is left out: in our
#: docstrings it names Ansible's own plugin tree as often as ours.
PATH_IN_DOCSTRING = re.compile(r"(?<![\w./-])((?:src|tests|docs|roles|playbooks|molecule|inventories|stacks|"
                               r"scripts|tools|benchmarks)/[A-Za-z0-9_./<>*-]*[A-Za-z0-9_/>*])")


@cache
def tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text())


def docstrings(module: str) -> list[str]:
    nodes = [n for n in ast.walk(tree(module))
             if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)]
    return [doc for n in nodes if (doc := ast.get_docstring(n, clean=False))]


def defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module or class body binds (definitions, assignments, imports), read from the source."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id: node for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0]: node for a in node.names}
    return out


def stale_references(text: str) -> list[str]:
    """References in ``text`` to modules, names in them or repository paths that do not exist."""
    stale = []
    for ref in DOTTED.findall(text):
        parts = ref.split(".")
        found = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in MODULES), 0)
        body: list[ast.stmt] | None = tree(".".join(parts[:found])).body if found else None
        for attr in parts[found:]:
            if body is None:
                break  # an attribute of something not a module or class: not followed
            node = defined(body).get(attr)
            if node is None:
                body = None
                stale.append(ref)
                break
            body = node.body if isinstance(node, ast.ClassDef) else None
        if not found:
            stale.append(ref)
    for raw in PATH_IN_DOCSTRING.findall(text):
        path = re.split(r"[<*]", raw)[0].rstrip("/.") if ("<" in raw or "*" in raw) else raw.rstrip(".")
        if path and not (REPO / path.split("::")[0].split("#")[0].split(":")[0]).exists():
            stale.append(raw)
    return stale


def test_docstrings_name_only_modules_and_paths_that_exist() -> None:
    stale = {name: refs for name in sorted(MODULES)
             if (refs := [r for doc in docstrings(name) for r in stale_references(doc)])}
    assert stale == {}


@pytest.mark.parametrize(("text", "stale"), [
    ("reads ``gpucluster.local.volcano``", ["gpucluster.local.volcano"]),  # a module that moved away
    (":func:`~gpucluster.render.dra_chart.values`", ["gpucluster.render.dra_chart.values"]),
    (":func:`gpucluster.render.nowhere`", ["gpucluster.render.nowhere"]),  # a name the module lacks
    ("see src/gpucluster/render/dra_chart.py", ["src/gpucluster/render/dra_chart.py"]),
    # these exist: a module, a name in it, a path, a label key, a pattern's fixed prefix
    (":mod:`gpucluster.render.dra_driver`, :func:`gpucluster.render.render`, ``tests/unit``, "
     "gpucluster.dev/pool, inventories/<env>/cluster.yaml", []),
])
def test_the_docstring_check_sees_a_stale_reference(text: str, stale: list[str]) -> None:
    assert stale_references(text) == stale


def test_no_test_imports_from_a_conftest() -> None:
    # conftest modules share one module name per folder: importing from one picks whichever was loaded
    # first (it broke two integration modules once). Shared helpers live in uniquely named modules.
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                 if re.search(r"^\s*(from conftest import|import conftest)", p.read_text(), re.M)]
    assert offenders == []


def test_the_documented_layers_are_the_contracts() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    block = doc.split("<!-- layers:", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    (layers,) = [c["layers"] for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
                 if c["id"] == "layers"]
    assert block.splitlines() == layers
