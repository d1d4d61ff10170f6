"""Read ``cluster.yaml`` safely and turn every problem into a :class:`SpecError` with spec paths.

Guards, each giving one clear error fast: a missing path, a directory or unreadable file, a file over
:data:`MAX_BYTES`, bytes that are not UTF-8, malformed YAML (with line and column), an empty file, a top
level that is not a mapping, YAML aliases that expand past :data:`MAX_NODES` (the "billion laughs"
bomb), and integers beyond 64 bits (Python refuses to convert more than 4300 digits at all).
"""

from __future__ import annotations

import difflib
import re
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
_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
#: The widest integer any setting takes: Kubernetes' int64 (quotas, counts, priorities).
INT_RANGE = (-(2**63), 2**63 - 1)
#: An integer scalar longer than this is out of range whatever its base; shorter ones are converted and compared.
_MAX_INT_CHARS = 72


def spec_path(inventory: str | Path) -> Path:
    """Accept an inventory folder (``inventories/lab``) or the spec file itself."""
    path = Path(inventory)
    try:
        if path.is_dir():
            path = path / SPEC_FILE
        if not path.exists():
            hint = "pass an inventory folder holding cluster.yaml, e.g. -i inventories/local"
            raise InputError(f"{path}: no such file ({hint})")
        if path.is_dir():
            raise InputError(f"{path}: a folder where the spec file should be (give the inventory folder that holds "
                             f"{SPEC_FILE} as a file, or the spec file itself)")
        if not path.is_file():
            raise InputError(f"{path}: not a regular file (a device, pipe or socket); give the spec file itself")
    except OSError as err:  # a folder on the way that may not be searched
        raise InputError(f"{path}: cannot be read: {err.strerror or err} (check the permissions of the folders on "
                         "the way)") from None
    return path


def read_yaml(path: Path) -> Any:
    """The spec file's data, after every guard of this module."""
    return _read(path)[0]


def _read(path: Path) -> tuple[Any, dict[str, str]]:
    """The data and, by spec path, the source text of every unquoted scalar YAML did not read as text
    (``1.30`` becomes the number 1.3: the text is what a "quote it" hint must show)."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(
                f"{path}: the file is {size / 1e6:.1f} MB; a cluster spec is at most {MAX_BYTES // (1024 * 1024)} "
                "MiB (is this the right file?)"
            )
        with path.open("rb") as f:  # read at most one byte past the limit, whatever stat said
            raw = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError(f"{path}: cannot be read: {err.strerror or err} (check that the file is readable by this "
                         "user, e.g. ls -l)") from None
    if len(raw) > MAX_BYTES:
        raise InputError(f"{path}: the file holds more than {MAX_BYTES // (1024 * 1024)} MiB; a cluster spec is "
                         "smaller (is this the right file?)")
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
    texts = _check_shape(path, node)
    _check_expansion(path, node)
    try:
        data = yaml.constructor.SafeConstructor().construct_document(node)
    except yaml.YAMLError as err:  # constructor errors (e.g. bad tags)
        raise InputError(f"{path}: malformed YAML: {_yaml_msg(err)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: the top level must be a mapping (metadata:, hosts:, nodePools:, ...)")
    return data, texts


def _yaml_msg(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def _check_shape(path: Path, root: yaml.Node) -> dict[str, str]:
    """Refuse input nested deeper than :data:`MAX_DEPTH`, keys given twice in one mapping, and integers
    outside :data:`INT_RANGE`.

    Iterative (the steps after it recurse). YAML itself lets the last of two equal keys win, so a second
    ``gpu:`` in a pool would silently replace the first; every duplicate is reported with both lines.
    Integers are checked before they are constructed: Python's ``int()`` raises on more than 4300 digits.
    Returns the source text of each plain scalar that is not a string, by spec path.
    """
    problems: list[Problem] = []
    raw: dict[str, str] = {}
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
        if isinstance(node, yaml.ScalarNode) and node.tag != _STR_TAG and not node.style:
            raw[where] = node.value
        if isinstance(node, yaml.ScalarNode) and node.tag == _INT_TAG:
            problem = _int_problem(where, node)
            if problem is not None:
                problems.append(problem)
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                child = f"{where}.{name}" if where else str(name)
                if isinstance(key, yaml.ScalarNode) and key.tag == _INT_TAG:
                    problem = _int_problem(f"{where}.{key.value[:20]}" if where else key.value[:20], key)
                    if problem is not None:
                        problems.append(problem)
                        continue
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
    return raw


def _int_problem(where: str, node: yaml.ScalarNode) -> Problem | None:
    """A problem when an integer scalar lies outside :data:`INT_RANGE` (or is too long to convert)."""
    text = node.value
    value = None
    if len(text) <= _MAX_INT_CHARS:
        value = yaml.constructor.SafeConstructor().construct_yaml_int(node)
        if INT_RANGE[0] <= value <= INT_RANGE[1]:
            return None
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-4:]} ({len(text)} characters)"
    return Problem(where or "(top level)", f"line {node.start_mark.line + 1}: the integer {shown} is beyond any "
                   f"setting's range (64 bits: at most {INT_RANGE[1]})",
                   "check the value; if it is meant as text, quote it")


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
    data, raw = _read(path)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as err:
        problems = problems_from_pydantic(err, raw)
        raise SpecError(str(path), problems + _cross_field_despite(err, data, problems)) from None
    problems = validate(spec)
    if any(p.severity == "error" for p in problems):
        raise SpecError(str(path), problems)
    spec.record_warnings(problems)
    return spec


def warnings_of(spec: ClusterSpec) -> list[Problem]:
    """Validation's warnings about a loaded spec (``spec.warnings``)."""
    return spec.warnings


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


def problems_from_pydantic(err: ValidationError, raw: dict[str, str] | None = None) -> list[Problem]:
    """One problem per pydantic error, in our words: the value echoed, never pydantic's wording or our
    class names. ``raw`` (spec path → source text, from :func:`_read`) turns an unquoted ``1.30`` that
    YAML read as a number into a "quote it" hint with the text as written."""
    problems: list[Problem] = []
    unions: dict[str, int] = {}
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
        elif e["type"] != "value_error":
            msg, hint = _type_problem(e, loc, (raw or {}).get(path))
        if path in unions and msg.startswith("expected ") and ", got " in msg:
            # a union (int | str) reports one failure per member: one problem naming every member
            first = problems[unions[path]]
            taken, got = first.message.removeprefix("expected ").split(", got ", 1)
            more = msg.removeprefix("expected ").split(", got ", 1)[0]
            if more not in taken.split(" or "):
                problems[unions[path]] = Problem(path, f"expected {taken} or {more}, got {got}", first.hint or hint)
            continue
        if msg.startswith("expected ") and ", got " in msg:
            unions[path] = len(problems)
        problems.append(Problem(path, msg, hint))
    return problems


#: What each kind of field expects, by pydantic error type (pydantic-core ErrorType).
_EXPECTED = {
    "dict_type": "a mapping (key: value lines)", "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "list_type": "a list", "tuple_type": "a list", "set_type": "a list",
    "string_type": "text", "string_sub_type": "text",
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
    "bool_parsing": "true or false",
}
#: Bounds, by pydantic error type: (the constraint's key in ``ctx``, how the value misses it, the fix).
_BOUNDS = {
    "greater_than_equal": ("ge", "below the minimum of {n}", "give {n} or more"),
    "greater_than": ("gt", "not above {n}", "give a value above {n}"),
    "less_than_equal": ("le", "above the maximum of {n}", "give {n} or less"),
    "less_than": ("lt", "not below {n}", "give a value below {n}"),
}


def _shown(value: Any) -> str:
    """A value as a user would recognise it from their YAML."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value[:60]!r}" + ("..." if len(value) > 60 else "")
    if isinstance(value, dict):
        return f"a mapping (keys: {', '.join(str(k) for k in list(value)[:5])})" if value else "an empty mapping"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return type(value).__name__


def _type_problem(e: Any, loc: tuple, raw: str | None) -> tuple[str, str]:
    """A type or range error in our words: what the field takes, the value echoed, a hint."""
    kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
    if kind in _BOUNDS:
        key, how, fix = _BOUNDS[kind]
        return f"{value!r} is {how.format(n=ctx.get(key))}", fix.format(n=ctx.get(key))
    if kind in ("too_short", "too_long"):
        size = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        fewer = "at least" if kind == "too_short" else "at most"
        return f"takes {fewer} {size} item(s), got {ctx.get('actual_length', '?')}", ""
    if kind in ("enum", "literal_error"):
        return f"{value!r} is not allowed", f"one of: {ctx.get('expected', '')}"
    expected = _EXPECTED.get(kind)
    if expected is None:  # a kind not listed: pydantic's sentence without its type names
        return re.sub(r"\s*(or )?instance of \w+", "", e["msg"]) + f"; got {_shown(value)}", ""
    msg = f"expected {expected}, got {_shown(value)}"
    hint = ""
    if kind.startswith("string") and raw is not None:
        hint = f'YAML reads the unquoted {raw} as a {"boolean" if isinstance(value, bool) else "number"}; ' \
               f'quote it: "{raw}"'
    elif expected.startswith("a mapping"):
        keys = _allowed_keys(loc)
        hint = f"write its keys on indented lines below it ({', '.join(keys)})" if keys else ""
    elif expected == "a list":
        hint = "write [a, b] or one '- item' line per item"
    return msg, hint


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
    """Delete the mapping key at ``loc`` in ``data``; False when the path does not lead to one.

    Only the exact key goes: a required key that failed is missing from the copy after the first round,
    and deleting whatever encloses it instead (a whole ``tenants`` list for one tenant's bad name) would
    make every rule that reads the enclosing section blame lines that are right.
    """
    parts = [p for p in loc if isinstance(p, int) or ("[" not in p and "(" not in p)]
    if not parts or not isinstance(parts[-1], str):
        return False  # a list item or the top level: dropping it would shift later paths
    node = data
    for part in parts[:-1]:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return False
    if not isinstance(node, dict) or parts[-1] not in node:
        return False
    del node[parts[-1]]
    return True
