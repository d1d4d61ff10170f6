"""Bad files: each gives one clear error, fast, through the loader and through the CLI (exit 2)."""

from __future__ import annotations

import time

import pytest

from gpucluster.cli import entrypoint
from gpucluster.errors import InputError
from gpucluster.spec import load_spec

BOMB = """
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""

CASES = {
    # name: (content, expected substring of the one error)
    "malformed": ("metadata:\n  name: x\n hosts: [\n", "malformed YAML: line"),
    "empty": ("", "the file is empty"),
    "only-comments": ("# nothing here\n\n", "the file is empty"),
    "alias-bomb": (BOMB, "alias bomb"),
    "top-level-list": ("- a\n- b\n", "top level must be a mapping"),
    "not-utf8": (b"metadata: \xff\xfe\n", "not UTF-8"),
    "ten-megabytes": ("# " + "x" * (10 * 1024 * 1024) + "\n", "a cluster spec is at most"),
}


@pytest.mark.parametrize("name", CASES)
def test_bad_file_gives_one_clear_error_fast(write_spec, name):
    content, expected = CASES[name]
    folder = write_spec(content)
    started = time.perf_counter()
    with pytest.raises(InputError) as info:
        load_spec(folder)
    assert expected in str(info.value)
    assert str(folder) in str(info.value)  # names the file
    assert time.perf_counter() - started < 5  # fast: no expansion, no full parse of 10 MB


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"no such file.*-i inventories/local"):
        load_spec(tmp_path / "nope")


def test_missing_cluster_yaml_in_folder(tmp_path):
    with pytest.raises(InputError, match=r"cluster\.yaml: no such file"):
        load_spec(tmp_path)


@pytest.mark.parametrize("name", CASES)
def test_cli_exit_2_without_traceback(write_spec, capsys, name):
    content, expected = CASES[name]
    code = entrypoint(["validate", "-i", str(write_spec(content))])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err
    assert "Traceback" not in err


def test_cli_validation_errors_list_paths(write_spec, base, capsys):
    base["nodePools"][0]["gpu"]["model"] = "H100"
    base["tenants"][0]["quota"]["memory"] = "256GB"
    code = entrypoint(["validate", "-i", str(write_spec(base))])
    err = capsys.readouterr().err
    assert code == 2
    assert "2 errors" in err
    assert "nodePools[0].gpu.model: unknown GPU model 'H100'" in err
    assert "tenants[0].quota.memory" in err and "256Gi" in err


def test_cli_validate_json(write_spec, base, capsys):
    import json

    base["nodePools"][1]["sharing"]["replicas"] = 1
    code = entrypoint(["validate", "-i", str(write_spec(base)), "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["valid"] is False
    assert out["problems"][0]["path"] == "nodePools[1].sharing.replicas"


def test_cli_validate_ok(local_inventory, capsys):
    assert entrypoint(["validate", "-i", str(local_inventory)]) == 0
    assert "local: valid (9 hosts, 6 pools, 50 GPUs, 2 tenants)" in capsys.readouterr().out


def test_cli_unknown_option_is_a_usage_error(capsys):
    assert entrypoint(["validate", "--nope"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_a_key_given_twice_is_an_error_naming_both_lines(write_spec, cli) -> None:
    # YAML keeps the last of two equal keys: a second `gpu:` used to turn an H100 pool into L4 silently.
    text = ("metadata: {name: x}\nhosts:\n  - {name: h, address: 10.0.0.1, roles: [control-plane]}\n"
            "nodePools:\n  - name: a\n    hosts: [h]\n    gpu: {model: H100-SXM5-80GB, count: 8}\n"
            "    gpu: {model: L4, count: 4}\n")
    out = cli("validate", "-i", str(write_spec(text)))
    assert out.exit_code == 2
    assert "nodePools[0].gpu: key 'gpu' is given twice (line 7 and line 8)" in out.stderr
    assert "Traceback" not in out.output


@pytest.mark.parametrize("depth", [70, 900])
def test_deep_nesting_is_bad_input_not_an_internal_error(write_spec, cli, depth: int) -> None:
    out = cli("validate", "-i", str(write_spec("metadata: {name: x}\nhosts: " + "[" * depth + "]" * depth + "\n")))
    assert out.exit_code == 2, out.output
    assert "nested more than 64 levels deep" in out.stderr and "internal error" not in out.output


def test_the_same_key_in_two_different_mappings_is_fine(write_spec, base) -> None:
    base["nodePools"][1]["labels"] = {"gpu": "l4"}  # a label named like a sibling mapping's key
    assert load_spec(write_spec(base)).node_pools[1].labels == {"gpu": "l4"}
