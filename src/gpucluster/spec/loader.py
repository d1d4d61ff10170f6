"""Read ``cluster.yaml`` safely and turn every problem into a :class:`SpecError` with spec paths.

Guards, each giving one clear error fast: a missing path, a file over :data:`MAX_BYTES`, bytes that
are not UTF-8, malformed YAML (with line and column), an empty file, a top level that is not a
mapping, and YAML aliases that expand past :data:`MAX_NODES` (the "billion laughs" bomb).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpucluster.errors import InputError, Problem, SpecError
from gpucluster.spec.model import ClusterSpec

MAX_BYTES = 2 * 1024 * 1024
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NODES = 200_000
#: No spec section nests deeper than a dozen levels; anything far deeper is a mistake (or an attack on
#: the recursive steps after parsing), refused before any of them runs.
MAX_DEPTH = 64
SPEC_FILE = "cluster.yaml"


def spec_path(inventory: str | Path) -> Path:
    """Accept an inventory folder (``inventories/lab``) or the spec file itself."""
    path = Path(inventory)
    if path.is_dir():
        path = path / SPEC_FILE
    if not path.exists():
        hint = "pass an inventory folder holding cluster.yaml, e.g. -i inventories/local"
        raise InputError(f"{path}: no such file ({hint})")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    return path


def read_yaml(path: Path) -> Any:
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise InputError(
            f"{path}: the file is {size / 1e6:.1f} MB; a cluster spec is at most {MAX_BYTES // (1024 * 1024)} MiB "
            "(is this the right file?)"
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte {err.start}); save the spec as UTF-8") from None
    if not text.strip() or all(line.lstrip().startswith("#") for line in text.splitlines() if line.strip()):
        raise InputError(f"{path}: the file is empty; start from inventories/local/cluster.yaml")
    try:
        # Compose first (libyaml when present), check the shape and the alias expansion on the node
        # graph, and only then construct Python objects, so a bomb is refused before it is expanded.
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML: {_yaml_msg(err)}") from None
    except RecursionError:  # the pure-Python composer (no libyaml) recurses per nesting level
        raise InputError(f"{path}: the spec is nested too deeply to read; check the brackets and indentation") \
            from None
    if node is None:
        raise InputError(f"{path}: the file is empty; start from inventories/local/cluster.yaml")
    _check_shape(path, node)
    _check_expansion(path, node)
    try:
        data = yaml.constructor.SafeConstructor().construct_document(node)
    except yaml.YAMLError as err:  # constructor errors (e.g. bad tags)
        raise InputError(f"{path}: malformed YAML: {_yaml_msg(err)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: the top level must be a mapping (metadata:, hosts:, nodePools:, ...)")
    return data


def _yaml_msg(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def _check_shape(path: Path, root: yaml.Node) -> None:
    """Refuse input nested deeper than :data:`MAX_DEPTH`, and keys given twice in one mapping.

    Iterative (the steps after it recurse). YAML itself lets the last of two equal keys win, so a second
    ``gpu:`` in a pool would silently replace the first; every duplicate is reported with both lines.
    """
    problems: list[Problem] = []
    stack: list[tuple[yaml.Node, str, int]] = [(root, "", 1)]
    seen: set[int] = set()
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{path}: line {node.start_mark.line + 1}: the spec is nested more than {MAX_DEPTH} "
                             f"levels deep{f' (under {where[:40]}...)' if where else ''}; no section of a cluster spec "
                             "nests that far — check the brackets and indentation")
        if id(node) in seen:  # an alias: its node was checked where it was defined
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                child = f"{where}.{name}" if where else str(name)
                if name is not None and name != "<<":
                    line = key.start_mark.line + 1
                    if name in first:
                        problems.append(Problem(child, f"key {name!r} is given twice (line {first[name]} and line "
                                                f"{line}); YAML would silently keep only the second",
                                                "remove one of them, or merge what they say"))
                    else:
                        first[name] = line
                stack.append((value, child, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(node.value))
    if problems:
        raise SpecError(str(path), problems)


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Count nodes as if every alias were expanded; shared subtrees are counted once per use."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # cycles (recursive anchors) count once
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(n) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        sizes[key] = total
        if total > MAX_NODES:
            raise InputError(
                f"{path}: YAML aliases expand to more than {MAX_NODES} nodes (an alias bomb?); "
                "remove the nested anchors"
            )
        return total

    size(root)


def load_spec(inventory: str | Path) -> ClusterSpec:
    """Load and fully validate a spec; raise :class:`SpecError` listing every problem."""
    from gpucluster.spec.validate import validate  # cross-field rules need the model first

    path = spec_path(inventory)
    data = read_yaml(path)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as err:
        problems = problems_from_pydantic(err, data)
        raise SpecError(str(path), problems + _cross_field_despite(err, data, problems)) from None
    problems = validate(spec)
    if any(p.severity == "error" for p in problems):
        raise SpecError(str(path), problems)
    spec.__dict__["_warnings"] = [p for p in problems if p.severity == "warning"]
    return spec


def warnings_of(spec: ClusterSpec) -> list[Problem]:
    return list(spec.__dict__.get("_warnings", []))


def format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or "(" in part or part in {"str", "int", "float", "bool", "list", "dict"}:
            continue  # pydantic's validator/union markers are not spec paths
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def problems_from_pydantic(err: ValidationError, data: Any) -> list[Problem]:
    problems = []
    for e in err.errors():
        loc = e["loc"]
        path = format_loc(loc)
        msg = e["msg"].removeprefix("Value error, ")
        hint = ""
        if "; hint: " in msg:
            msg, hint = msg.split("; hint: ", 1)
        if e["type"] == "extra_forbidden":
            key = str(loc[-1])
            msg = f"unknown key {key!r}"
            allowed = _allowed_keys(loc[:-1])
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(sorted(allowed))}"
        elif e["type"] == "missing":
            msg = "required key is missing"
        elif e["type"] == "literal_error":
            msg = f"{e.get('input')!r} is not allowed: {e['msg']}"
        problems.append(Problem(path, msg, hint))
    return problems


def _allowed_keys(loc: tuple) -> list[str]:
    """The aliases valid at ``loc``, found by walking the model's field annotations."""
    from pydantic import BaseModel

    model: Any = ClusterSpec
    for part in loc:
        if isinstance(part, int) or not isinstance(model, type) or not issubclass(model, BaseModel):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        model = _inner_model(field.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or n for n, f in model.model_fields.items()]
    return []


def _inner_model(annotation: Any) -> Any:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _cross_field_despite(err: ValidationError, data: Any, seen: list[Problem]) -> list[Problem]:
    """Run the cross-field rules on a copy without the fields that failed, so one pass reports all.

    Only mapping keys are dropped (list items would shift the indices of later paths); when a key
    that failed is required, or the copy still fails after a few rounds, this gives up quietly.
    """
    import copy

    from gpucluster.spec.validate import validate

    trimmed = copy.deepcopy(data)
    for _ in range(3):
        for e in err.errors():
            if not _drop(trimmed, e["loc"]):
                return []
        try:
            spec = ClusterSpec.model_validate(trimmed)
        except ValidationError as again:
            err = again
            continue
        known = {(p.path, p.message) for p in seen}
        return [p for p in validate(spec) if (p.path, p.message) not in known]
    return []


def _drop(data: Any, loc: tuple) -> bool:
    parts = [p for p in loc if isinstance(p, int) or ("[" not in p and "(" not in p)]
    node, parent, key = data, None, None
    for part in parts:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            parent, key, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            break
    if parent is None or key is None:
        return False
    del parent[key]
    return True
