"""gpucluster.cel without the oracle: the verdicts callers rely on, and the evaluation shortcuts that must not
change a verdict. The upstream tier compares the same engine with Kubernetes' own
(tests/upstream/test_cel_upstream.py)."""

from __future__ import annotations

import dataclasses

import pytest

from gpucluster import cel

D = "gpu.nvidia.com"
A = f"device.attributes['{D}']"
GPU = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                                       "cudaComputeCapability": {"version": "9.0.0"},
                                       "driverVersion": {"version": "580.95.5"}},
       "capacity": {"memory": {"value": "81559Mi"}}}
MIG = {"name": "gpu-0-mig-1g10gb",
       "attributes": {f"{D}/type": {"string": "mig"}, f"{D}/profile": {"string": "1g.10gb"}},
       "capacity": {f"{D}/memory": {"value": "9984Mi"}}}

#: Each verdict was checked with the dra-cel oracle (Kubernetes v1.37.2's DRA library) on 2026-12-02.
CASES = [
    # (expression, verdict on GPU, verdict on MIG)
    (f"device.driver == '{D}' && {A}.type == 'gpu'", "match", "no match"),
    (f"{A}.profile == '1g.10gb'", "error", "match"),                      # a missing attribute fails
    (f"{A}.type == 'mig' && {A}.profile == '1g.10gb'", "no match", "match"),  # unless && stops first
    (f"{A}.?profile.orValue('') == '1g.10gb'", "no match", "match"),
    (f"device.capacity['{D}'].memory.compareTo(quantity('80G')) >= 0", "match", "no match"),
    (f"device.capacity['{D}'].memory.compareTo(quantity('8e10')) >= 0", "match", "no match"),
    (f"{A}.cudaComputeCapability.compareTo(semver('9.0.0')) >= 0", "match", "error"),
    (f"sign(device.capacity['{D}'].memory) == 1", "match", "match"),
    ("'x' in device.attributes['example.com']", "no match", "no match"),    # an unknown domain is empty
    (f"size({A}) > 3", "match", "no match"),
    (f"cel.bind(g, {A}, g.type == 'gpu')", "match", "no match"),
    (f"{A}.productName", "error", "error"),                                # not a bool at run time
]


@pytest.mark.parametrize(("expr", "on_gpu", "on_mig"), CASES)
def test_verdicts(expr, on_gpu, on_mig):
    program = cel.compile_expr(expr)
    assert cel.evaluate(program, D, GPU).verdict == on_gpu
    assert cel.evaluate(program, D, MIG).verdict == on_mig


@pytest.mark.parametrize(("expr", "_gpu", "_mig"), CASES)
def test_reading_only_what_a_selector_names_changes_no_verdict(expr, _gpu, _mig):
    program = cel.compile_expr(expr)
    whole = dataclasses.replace(program, reads=None)
    for device in (GPU, MIG, {**GPU, "name": "other"}):
        assert cel.evaluate(program, D, device) == cel.evaluate(whole, D, device)


def test_what_a_selector_reads():
    assert cel.compile_expr(f"device.driver == '{D}' && {A}.type == 'gpu' && has({A}.profile)").reads == {
        ("attributes", D, "type"), ("attributes", D, "profile")}
    # a map used as a whole sees every entry
    assert cel.compile_expr(f"size({A}) > 0").reads is None
    assert cel.compile_expr(f"cel.bind(g, {A}, g.type == 'gpu')").reads is None


def test_an_unreadable_version_fails_every_selector_as_kubernetes_does():
    broken = {**GPU, "attributes": {**GPU["attributes"], "driverVersion": {"version": "580.95"}}}
    outcome = cel.evaluate(cel.compile_expr("true"), D, broken)
    assert outcome.verdict == "error" and "attribute driverVersion: parse semantic version" in outcome.error


def test_matches_raises_where_kubernetes_fails_the_allocation():
    with pytest.raises(cel.SelectorFailed, match=r"fails on device gpu-0: no such key: profile"):
        cel.matches(cel.compile_expr(f"{A}.profile == '1g.10gb'"), D, GPU)


def test_selectors_of_a_class_stop_at_the_first_that_does_not_match():
    programs = [cel.compile_expr(f"{A}.type == 'mig'"), cel.compile_expr(f"{A}.profile == '1g.10gb'")]
    assert cel.evaluate_all(programs, D, GPU).verdict == "no match"  # the second never runs on a GPU
    assert cel.evaluate_all(programs[::-1], D, GPU).verdict == "error"


@pytest.mark.parametrize(("expr", "error"), [
    ("device.nope == 1", cel.CompileError),
    ("device.driver == 1", cel.CompileError),
    ("device.driver", cel.CompileError),                       # must evaluate to bool
    (f"device.capacity['{D}'].memory.sign() == 1", cel.CompileError),   # sign is not a method
    ("isURL('https://example.com')", cel.Unsupported),
    (f"device.capacity['{D}'].memory.isInteger()", cel.Unsupported),
])
def test_compile_errors_and_functions_not_carried(expr, error):
    with pytest.raises(error):
        cel.compile_expr(expr)


def test_top_level_conjuncts_for_explanations():
    expr = (f"device.driver == '{D}' && ({A}.productName.contains('&&') || false) && "
            f"device.capacity['{D}'].memory.compareTo(quantity('80G')) >= 0")
    terms = cel.compile_expr(expr).terms
    assert [t.kind for t in terms] == ["driver", "cel", "cap_ge"]
    assert terms[1].text == f"{A}.productName.contains('&&') || false"
    assert terms[2].args == (D, "memory", "80G")
    assert [t.kind for t in cel.failed_terms(cel.compile_expr(expr), D, MIG)] == ["cel", "cap_ge"]
