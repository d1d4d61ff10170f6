"""DeviceClass CEL: writing literals, and evaluating selectors against devices as Kubernetes does.

Two readers need to know which devices a selector matches without a scheduler: spec validation (the
devices the spec's pools will publish, :mod:`gpucluster.spec.dra_fit`) and verification and the doctor
(the devices published now, read from the cluster together with the *deployed* expression).

The engine is ``cel-expr-python`` (Google's CEL C++ implementation, with a type checker and the strings,
bindings and optional-types extensions that Kubernetes' base environment also enables), given the
environment of the DRA library k8s.io/dynamic-resource-allocation v0.37.2 (``cel/compile.go``):

- ``device`` is typed: ``driver`` (string), ``allowMultipleAllocations`` (bool), ``attributes`` and
  ``capacity`` (domain -> name -> value); an unqualified attribute or capacity name belongs to the device's
  driver, and looking up an unknown domain gives an empty map (``newStringInterfaceMapWithDefault``);
- a missing attribute is a runtime error ("no such key"), and so is a version attribute that is not
  semver: the scheduler then fails the allocation (``structured/internal/stable/allocator_stable.go``
  ``selectorsMatch``), so :func:`evaluate` says "error", never "no match";
- the Kubernetes libraries our selectors use, as k8s.io/apiserver v0.37.2 ``pkg/cel/library/quantity.go``
  and ``semverlib.go`` define them: ``quantity``/``isQuantity`` with ``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``add``, ``sub``, ``asApproximateFloat`` and the global ``sign(q)``;
  ``semver``/``isSemver`` (with ``normalize``) with ``compareTo``, ``isGreaterThan``, ``isLessThan``,
  ``major``, ``minor``, ``patch``.

Kubernetes library functions outside those (``url``, ``ip``, ``cidr``, ``format``, lists, sets, regex
``find``) are :class:`Unsupported`: the caller says it could not check, never that the check passed. So
are ``isInteger``/``asInteger``: upstream answers them from how ``ParseQuantity`` happened to store the
number (``AsInt64`` refuses anything held as inf.Dec or with a negative scale: ``1.5Ti``, ``1000m``), which
a value here does not carry.
``tests/upstream/test_cel_upstream.py`` compares every selector gpucluster renders, and edge cases, with
the DRA library itself (the dra-cel tool).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any

from gpucluster import semver as semverlib
from gpucluster.quantity import QuantityError, parse_quantity


def cel_string(value: str) -> str:
    """``value`` as a CEL string literal (single quotes, backslash and quote escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_list(values: list[str]) -> str:
    """A CEL list literal of strings, in the given order."""
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


class Unsupported(ValueError):
    """The expression uses a Kubernetes CEL library function this evaluator does not carry."""


class CompileError(ValueError):
    """The expression does not compile in Kubernetes' DRA environment (the API server refuses it, and a
    stored one fails every allocation that evaluates it)."""


#: Kubernetes CEL library functions (apiserver pkg/cel/library, cel-go ext.Lists/Sets) not carried here.
K8S_ONLY = frozenset({
    "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
    "find", "findAll", "isSorted", "sum", "min", "max", "ip", "isIP", "cidr", "isCIDR", "format",
    "sets.contains", "sets.equivalent", "sets.intersects", "lists.range", "slice", "flatten", "distinct",
    "reverse", "sort", "sortBy", "includes", "authorizer", "path", "group", "serviceAccount",
    "isInteger", "asInteger", "sets", "lists",  # the last two: namespaces as an undeclared reference names them
})

_STRING_LITERAL = re.compile(r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)\"""")


@dataclass(frozen=True)
class Term:
    """One top-level conjunct of a selector, compiled on its own (for explanations: which part failed).

    ``kind`` and ``args`` recognise the shapes :mod:`gpucluster.spec.selectors` renders (``cap_ge``,
    ``attr_eq``, ...; ``cel`` for anything else) so messages can say what a device reports; evaluation is
    always the engine's.
    """

    kind: str
    args: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Program:
    """A compiled selector: the expression, its engine program and its top-level conjuncts."""

    expression: str
    compiled: Any = field(repr=False, compare=False)
    terms: tuple[Term, ...] = ()
    domains: frozenset[str] = frozenset()
    #: The (attributes|capacity, domain, name) the expression reads, when it reads only such entries by
    #: literal keys; None when it uses a map as a whole (size, in, macros, bind): then it sees everything.
    reads: frozenset[tuple[str, str, str]] | None = None


@dataclass(frozen=True)
class Outcome:
    """What Kubernetes decides for one device: matched, or not; ``error`` set when evaluation failed (the
    scheduler fails the allocation)."""

    matched: bool
    error: str = ""

    @property
    def verdict(self) -> str:
        return "error" if self.error else "match" if self.matched else "no match"


class SelectorFailed(ValueError):
    """A selector's evaluation failed on a device: Kubernetes fails every allocation that evaluates it."""

    def __init__(self, expression: str, device: str, error: str) -> None:
        super().__init__(f"selector {expression!r} fails on device {device or '?'}: {error}")
        self.expression, self.device, self.error = expression, device, error


# -- the environment --------------------------------------------------------------------------------


@cache
def _env() -> Any:
    """(checking environment, evaluating environment, Quantity class, Semver class), built once."""
    from cel_expr_python import cel  # imported here: a native module the render path never needs
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(struct_pb2.DESCRIPTOR.serialized_pb))
    # kubernetes.Quantity / kubernetes.Semver are the type names apiserver's library gives its opaque types;
    # here they are messages holding the canonical value, so == compares values as Quantity.Equal and
    # Semver.EQ do. DRADevice's maps hold google.protobuf.Struct: to the checker, map(string, dyn).
    proto = descriptor_pb2.FileDescriptorProto(name="gpucluster/dra_cel.proto", package="kubernetes",
                                               syntax="proto3", dependency=["google/protobuf/struct.proto"])
    for name in ("Quantity", "Semver"):
        proto.message_type.add(name=name).field.add(name="value", number=1, type=9, label=1)
    device = proto.message_type.add(name="DRADevice")
    device.field.add(name="driver", number=1, type=9, label=1)
    device.field.add(name="allowMultipleAllocations", number=2, type=8, label=1)
    for number, name in ((3, "attributes"), (4, "capacity")):
        entry = device.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=9, label=1)
        entry.field.add(name="value", number=2, type=11, label=1, type_name=".google.protobuf.Struct")
        device.field.add(name=name, number=number, type=11, label=3,
                         type_name=f".kubernetes.DRADevice.{entry.name}")
    pool.Add(proto)
    quantity_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity"))
    semver_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver"))

    q_t, s_t = cel.Type("kubernetes.Quantity"), cel.Type("kubernetes.Semver")
    string, boolean, integer, double = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT, cel.Type.DOUBLE
    lib = _Library(quantity_cls, semver_cls)

    def fn(name: str, *overloads: tuple[str, Any, list[Any], bool]) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(oid, ret, params, is_member=member)
                                       for oid, ret, params, member in overloads])

    # What the checker sees: the overloads of quantity.go and semverlib.go, typed.
    declared = [
        fn("quantity", ("string_to_quantity", q_t, [string], False)),
        fn("isQuantity", ("is_quantity_string", boolean, [string], False)),
        fn("sign", ("quantity_sign", integer, [q_t], False)),  # a global function, not a method
        fn("isGreaterThan", ("quantity_is_greater_than", boolean, [q_t, q_t], True),
           ("semver_is_greater_than", boolean, [s_t, s_t], True)),
        fn("isLessThan", ("quantity_is_less_than", boolean, [q_t, q_t], True),
           ("semver_is_less_than", boolean, [s_t, s_t], True)),
        fn("compareTo", ("quantity_compare_to", integer, [q_t, q_t], True),
           ("semver_compare_to", integer, [s_t, s_t], True)),
        fn("asApproximateFloat", ("quantity_get_float", double, [q_t], True)),
        fn("add", ("quantity_add", q_t, [q_t, q_t], True), ("quantity_add_int", q_t, [q_t, integer], True)),
        fn("sub", ("quantity_sub", q_t, [q_t, q_t], True), ("quantity_sub_int", q_t, [q_t, integer], True)),
        fn("semver", ("string_to_semver", s_t, [string], False),
           ("string_bool_to_semver", s_t, [string, boolean], False)),
        fn("isSemver", ("is_semver_string", boolean, [string], False),
           ("is_semver_string_bool", boolean, [string, boolean], False)),
        fn("major", ("semver_major", integer, [s_t], True)),
        fn("minor", ("semver_minor", integer, [s_t], True)),
        fn("patch", ("semver_patch", integer, [s_t], True)),
    ]
    # What runs: the engine keys implementations by value kind, and both message types are one kind
    # (struct), so each function has one implementation per signature that dispatches on the value (a
    # receiver of another type is "no such overload", as in cel-go).
    def run(name: str, params: list[Any], member: bool, impl: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"run_{name}_{len(params)}_{params[-1].name()}", dyn, params,
                                                    is_member=member, impl=impl)])

    dyn = cel.Type.DYN
    runtime = [
        run("quantity", [string], False, lib.quantity), run("isQuantity", [string], False, lib.is_quantity),
        run("sign", [q_t], False, lib.q_sign), run("isGreaterThan", [q_t, q_t], True, lib.greater),
        run("isLessThan", [q_t, q_t], True, lib.less), run("compareTo", [q_t, q_t], True, lib.compare),
        run("asApproximateFloat", [q_t], True, lib.q_float),
        cel.FunctionDecl("add", [cel.Overload("run_add_q", dyn, [q_t, q_t], is_member=True, impl=lib.q_add),
                                 cel.Overload("run_add_int", dyn, [q_t, integer], is_member=True, impl=lib.q_add)]),
        cel.FunctionDecl("sub", [cel.Overload("run_sub_q", dyn, [q_t, q_t], is_member=True, impl=lib.q_sub),
                                 cel.Overload("run_sub_int", dyn, [q_t, integer], is_member=True, impl=lib.q_sub)]),
        cel.FunctionDecl("semver", [
            cel.Overload("run_semver_1", dyn, [string], impl=lib.semver),
            cel.Overload("run_semver_2", dyn, [string, boolean], impl=lib.semver)]),
        cel.FunctionDecl("isSemver", [
            cel.Overload("run_is_semver_1", dyn, [string], impl=lib.is_semver),
            cel.Overload("run_is_semver_2", dyn, [string, boolean], impl=lib.is_semver)]),
        run("major", [s_t], True, lib.major), run("minor", [s_t], True, lib.minor),
        run("patch", [s_t], True, lib.patch),
    ]

    def env(device_type: Any, functions: list[Any]) -> Any:
        return cel.NewEnv(descriptor_pool=pool, variables={"device": device_type}, functions=functions,
                          extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(),
                                      ext_optional.ExtOptional()])

    return env(cel.Type("kubernetes.DRADevice"), declared), env(dyn, runtime), lib


class _Library:
    """The Kubernetes quantity and semver functions over their message values."""

    def __init__(self, quantity_cls: Any, semver_cls: Any) -> None:
        self.quantity_cls, self.semver_cls = quantity_cls, semver_cls

    # quantities: the message holds the exact value, so == is Quantity.Equal (Cmp == 0)
    def make_quantity(self, value: Decimal) -> Any:
        text = str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")
        return self.quantity_cls(value=text)

    def quantity(self, text: str) -> Any:
        return self.make_quantity(parse_quantity(text))

    @staticmethod
    def is_quantity(text: str) -> bool:
        try:
            parse_quantity(text)
        except QuantityError:
            return False
        return True

    def _d(self, q: Any) -> Decimal:
        if not isinstance(q, self.quantity_cls):
            raise TypeError("no such overload")
        return Decimal(q.value)

    def q_cmp(self, a: Any, b: Any) -> int:
        x, y = self._d(a), self._d(b)
        return (x > y) - (x < y)

    def q_sign(self, a: Any) -> int:
        return self.q_cmp(a, self.quantity_cls(value="0"))

    def q_float(self, a: Any) -> float:
        return float(self._d(a))

    def q_add(self, a: Any, b: Any) -> Any:
        return self.make_quantity(self._d(a) + (Decimal(b) if type(b) is int else self._d(b)))

    def q_sub(self, a: Any, b: Any) -> Any:
        return self.make_quantity(self._d(a) - (Decimal(b) if type(b) is int else self._d(b)))

    # dispatch for the functions both types have (the engine sees one kind of value for both)
    def _kind(self, *values: Any) -> str:
        if all(isinstance(v, self.quantity_cls) for v in values):
            return "quantity"
        if all(isinstance(v, self.semver_cls) for v in values):
            return "semver"
        raise TypeError("no such overload")

    def compare(self, a: Any, b: Any) -> int:
        return self.q_cmp(a, b) if self._kind(a, b) == "quantity" else self.s_cmp(a, b)

    def greater(self, a: Any, b: Any) -> bool:
        return self.compare(a, b) > 0

    def less(self, a: Any, b: Any) -> bool:
        return self.compare(a, b) < 0

    def major(self, a: Any) -> int:
        return self._semver_parts(a)[0]

    def minor(self, a: Any) -> int:
        return self._semver_parts(a)[1]

    def patch(self, a: Any) -> int:
        return self._semver_parts(a)[2]

    def _semver_parts(self, a: Any) -> tuple[int, int, int]:
        if self._kind(a) != "semver":
            raise TypeError("no such overload")
        return self.s_parts(a)

    # versions: the message holds the version without build metadata, so == is Semver.EQ
    def make_semver(self, version: semverlib.Version) -> Any:
        return self.semver_cls(value=version.text(build=False))

    def semver(self, text: str, normalize: bool = False) -> Any:
        return self.make_semver(semverlib.parse(text, normalize=normalize))

    @staticmethod
    def is_semver(text: str, normalize: bool = False) -> bool:
        try:
            semverlib.parse(text, normalize=normalize)
        except ValueError:
            return False
        return True

    @staticmethod
    def s_cmp(a: Any, b: Any) -> int:
        return semverlib.compare(semverlib.parse(a.value), semverlib.parse(b.value))

    @staticmethod
    def s_parts(a: Any) -> tuple[int, int, int]:
        v = semverlib.parse(a.value)
        return v.major, v.minor, v.patch


# -- compiling ------------------------------------------------------------------------------------------


def _conjuncts(expr: str) -> list[str]:
    """The top-level ``&&`` operands of ``expr`` (outside parentheses, brackets and string literals)."""
    parts, depth, start, i, quote = [], 0, 0, 0, ""
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith("&&", i):
            parts.append(expr[start:i])
            start, i = i + 2, i + 1
        i += 1
    parts.append(expr[start:])
    out = []
    for part in parts:
        t = part.strip()
        while t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
            t = t[1:-1].strip()
        out.append(t)
    return out


def _balanced(text: str) -> bool:
    depth = 0
    for ch in re.sub(_STRING_LITERAL, "''", text):
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:
            return False
    return depth == 0


_S = r"'((?:[^'\\]|\\.)*)'"
_ATTR = rf"device\.attributes\[{_S}\]\.(\w+)"
_CAP = rf"device\.capacity\[{_S}\]\.(\w+)"
#: The shapes gpucluster.spec.selectors renders, for messages only.
SHAPES = [
    ("false", re.compile(r"^false$")),
    ("driver", re.compile(rf"^device\.driver == {_S}$")),
    ("attr_eq", re.compile(rf"^{_ATTR} == {_S}$")),
    ("attr_in", re.compile(rf"^{_ATTR} in \[((?:{_S}(?:, )?)*)\]$")),
    ("attr_contains", re.compile(rf"^{_ATTR}\.lowerAscii\(\)\.contains\({_S}\)$")),
    ("cap_ge", re.compile(rf"^{_CAP}\.compareTo\(quantity\({_S}\)\) >= 0$")),
    ("semver_ge", re.compile(rf"^{_ATTR}\.compareTo\(semver\({_S}\)\) >= 0$")),
]


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _shape(text: str) -> Term:
    for kind, rx in SHAPES:
        m = rx.match(text)
        if m:
            args = tuple(_unquote(a) for a in m.groups() if a is not None)
            if kind == "attr_in":
                args = (args[0], args[1], *(_unquote(v) for v in re.findall(_S, m[3])))
            return Term(kind, args, text)
    return Term("cel", (), text)


@cache
def _compile(expr: str) -> Any:
    check_env, eval_env, _ = _env()
    try:
        checked = check_env.compile(expr)
    except RuntimeError as err:
        message = str(err).removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
        missing = re.findall(r"undeclared reference to '([\w.]+)'|found no matching overload for '([\w.]+)'",
                             message)
        names = {a or b for a, b in missing}
        if names & K8S_ONLY:
            raise Unsupported(f"uses {', '.join(sorted(names & K8S_ONLY))}, a Kubernetes CEL function "
                              "gpucluster does not evaluate") from None
        raise CompileError(f"compilation failed: {message}") from None
    returns = checked.return_type().name()
    if returns not in ("BOOL", "DYN", "bool", "dyn"):
        raise CompileError(f"must evaluate to bool or the unknown type, not {returns.lower()}")
    # Evaluated unchecked against plain maps: the checked program would want DRADevice messages, whose
    # Struct maps cannot hold quantities and versions.
    return eval_env.compile(expr, disable_check=True)


@cache
def compile_expr(expr: str) -> Program:
    """Compile a selector in the DRA environment: :class:`CompileError` when Kubernetes would refuse it,
    :class:`Unsupported` when it uses a Kubernetes function this evaluator lacks."""
    compiled = _compile(expr)
    domains = frozenset(a or b for a, b in _STRING_LITERAL.findall(expr))
    terms = tuple(_shape(t) for t in _conjuncts(expr))
    return Program(expr, compiled, terms, domains, _reads(expr))


_LIT = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_ACCESS = re.compile(r"device\s*\.\s*(?:(?:driver|allowMultipleAllocations)\b"
                     rf"|(attributes|capacity)\s*\[\s*({_LIT})\s*\]"
                     rf"\s*(?:\.\s*\??\s*([A-Za-z_]\w*)|\[\s*({_LIT})\s*\]))")


def _reads(expr: str) -> frozenset[tuple[str, str, str]] | None:
    """What the expression reads of ``device``, if every use of it is a direct access by literal keys."""
    masked = _STRING_LITERAL.sub(lambda m: "'" + "_" * (len(m[0]) - 2) + "'", expr)
    out = set()
    for use in re.finditer(r"(?<![\w.])device\b", masked):
        m = _ACCESS.match(expr, use.start())
        if m is None:
            return None
        if m[1]:
            domain, name = m[2][1:-1], m[3] or m[4][1:-1]
            if "\\" in domain + name:
                return None  # escapes: not worth decoding here, read everything
            out.add((m[1], domain, name))
    return frozenset(out)


@cache
def _term_program(text: str) -> Program | None:
    try:
        return compile_expr(text)
    except (CompileError, Unsupported):
        return None


# -- evaluating -----------------------------------------------------------------------------------------


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@lru_cache(maxsize=8192)
def _device_input(driver: str, device_json: str) -> dict[str, Any]:
    """The ``device`` variable for one ResourceSlice device entry, as DeviceMatches builds it; ValueError
    for an attribute Kubernetes cannot read (a version that is not semver, no value)."""
    _, _, lib = _env()
    device = json.loads(device_json)
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, ident = _qualified(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(name, attr, lib)
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = _qualified(name, driver)
        capacity.setdefault(domain, {})[ident] = lib.make_quantity(parse_quantity(str(cap["value"])))
    return {"driver": driver, "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
            "attributes": attributes, "capacity": capacity}


def _attribute_value(name: str, attr: dict, lib: _Library) -> Any:
    for key in ("ints", "bools", "strings"):
        if attr.get(key) is not None:
            return list(attr[key])
    if attr.get("versions") is not None:
        return [lib.make_semver(_version(name, v)) for v in attr["versions"]]
    for key in ("int", "bool", "string"):
        if attr.get(key) is not None:
            return attr[key]
    if attr.get("version") is not None:
        return lib.make_semver(_version(name, attr["version"]))
    raise ValueError(f"attribute {name}: unsupported attribute value")


def _version(name: str, text: str) -> semverlib.Version:
    try:
        return semverlib.parse(text)
    except ValueError as err:
        raise ValueError(f"attribute {name}: parse semantic version: {err}") from None


def evaluate(program: Program, driver: str, device: dict) -> Outcome:
    """What Kubernetes decides for ``device`` (a ResourceSlice device entry) of ``driver``.

    Memoized on what the expression can see of the device: its driver and the entries it reads (so 8,000
    GPUs of a few shapes are a few evaluations), after checking, as DeviceMatches does first, that every
    attribute has a value Kubernetes can read.
    """
    problem = _attributes_problem(device)
    if problem:
        return Outcome(False, problem)
    seen = device if program.reads is None else _pruned(program.reads, driver, device)
    return _evaluate(program.expression, driver, json.dumps(seen, sort_keys=True, default=str))


def _attributes_problem(device: dict) -> str:
    for name, attr in (device.get("attributes") or {}).items():
        if not isinstance(attr, dict) or not any(attr.get(k) is not None for k in _VALUE_KEYS):
            return f"attribute {name}: unsupported attribute value"
        versions = attr.get("versions") or ([attr["version"]] if attr.get("version") is not None else [])
        for text in versions:
            error = _semver_error(str(text))
            if error:
                return f"attribute {name}: parse semantic version: {error}"
    return ""


_VALUE_KEYS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


@lru_cache(maxsize=4096)
def _semver_error(text: str) -> str:
    try:
        semverlib.parse(text)
    except ValueError as err:
        return str(err)
    return ""


def _pruned(reads: frozenset[tuple[str, str, str]], driver: str, device: dict) -> dict[str, Any]:
    """The device with only the entries ``reads`` names (qualified, so the driver's bare names count)."""
    out: dict[str, Any] = {"name": "", "attributes": {}, "capacity": {}}
    if device.get("allowMultipleAllocations") is not None:
        out["allowMultipleAllocations"] = device["allowMultipleAllocations"]
    for kind, domain, name in reads:
        entries = device.get(kind) or {}
        value = entries.get(f"{domain}/{name}")
        if value is None and domain == driver:
            value = entries.get(name)
        if value is not None:
            out[kind][f"{domain}/{name}"] = value
    return out


@lru_cache(maxsize=65536)
def _evaluate(expression: str, driver: str, device_json: str) -> Outcome:
    program = compile_expr(expression)
    try:
        built = _device_input(driver, device_json)
    except (ValueError, KeyError, TypeError) as err:
        return Outcome(False, str(err))
    empty: dict[str, dict[str, Any]] = {d: {} for d in program.domains}
    data = {**built, "attributes": {**empty, **built["attributes"]}, "capacity": {**empty, **built["capacity"]}}
    try:
        value = program.compiled.eval(data={"device": data})
    except Exception as err:  # the engine raises for some runtime failures instead of returning an error
        return Outcome(False, _runtime_message(str(err)))
    kind = value.type().name().lower()
    if kind == "error":
        return Outcome(False, _runtime_message(str(value.value())))
    if kind != "bool":
        return Outcome(False, f"CEL result of type {kind} could not be converted to bool")
    return Outcome(bool(value.value()))


def _runtime_message(text: str) -> str:
    text = re.sub(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$", "", text.strip())  # the engine's status code around it
    m = re.search(r'Key not found in map : "?([^"]*)"?', text)
    if m:
        return (f"no such key: {m[1]}. consider using CEL optional chaining (.? followed by orValue()) or "
                "guarding the check with has() for optional fields")
    return text


def evaluate_all(programs: Sequence[Program], driver: str, device: dict) -> Outcome:
    """Every selector of a class or request in order, as the allocator does: the first that does not
    match ends it, and an error fails it."""
    for program in programs:
        outcome = evaluate(program, driver, device)
        if outcome.error or not outcome.matched:
            return outcome
    return Outcome(True)


def matches(program: Program, driver: str, device: dict) -> bool:
    """Whether ``device`` matches; :class:`SelectorFailed` when Kubernetes' evaluation fails on it."""
    outcome = evaluate(program, driver, device)
    if outcome.error:
        raise SelectorFailed(program.expression, str(device.get("name", "")), outcome.error)
    return outcome.matched


def failed_terms(program: Program, driver: str, device: dict) -> list[Term]:
    """The top-level conjuncts that do not hold (or fail) for ``device``; empty when it matches."""
    out = []
    for term in program.terms:
        sub = _term_program(term.text)
        if sub is None or not evaluate(sub, driver, device).matched:
            out.append(term)
    return out


def attribute(device: dict, domain: str, name: str) -> Any:
    """An attribute's value (qualified, or bare for the device's own driver), or None."""
    attrs = device.get("attributes") or {}
    value = attrs.get(f"{domain}/{name}") or attrs.get(name)
    if not value:
        return None
    return next(iter(value.values()))


def capacity(device: dict, domain: str, name: str) -> Decimal | None:
    """A capacity's value as a number, or None."""
    caps = device.get("capacity") or {}
    cap = caps.get(f"{domain}/{name}") or caps.get(name)
    return None if cap is None else parse_quantity(str(cap["value"]))
