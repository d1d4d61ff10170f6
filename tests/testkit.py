"""Helpers the unit and upstream tests share: one copy, imported by name (``from testkit import by_kind``).

``tests/`` is on ``sys.path`` because the top-level conftest lives there (pytest's rootdir-less import), as
``ci_timing`` is; a helper pasted into several test files drifts apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import Problem, SpecError
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec, NodePool

REPO = Path(__file__).resolve().parents[1]
ANSIBLE_INVENTORY = Path(sys.executable).parent / "ansible-inventory"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def pool(spec: ClusterSpec, name: str) -> NodePool:
    """The node pool ``name`` of ``spec``."""
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """The objects of ``kind`` (named ``name``, if given); at least one, or the test fails naming what is missing."""
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def problems(write_spec: Any, spec: dict[str, Any] | str) -> list[Problem]:
    """Every problem loading ``spec`` reports; the spec must be refused."""
    folder: Path = write_spec(spec)
    with pytest.raises(SpecError) as info:
        load_spec(folder)
    return info.value.problems


def host(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """Host ``name`` of a raw spec dict (to edit it in place)."""
    return next(h for h in raw["hosts"] if h["name"] == name)


def find(probs: list[Problem], path: str) -> Problem:
    """The first problem at ``path``; the test fails listing them all when there is none."""
    hits = [p for p in probs if p.path == path]
    assert hits, f"no problem at {path}; got {[str(p) for p in probs]}"
    return hits[0]


# -- the inventory plugin and the kubernetes_node role's variables, evaluated by Ansible itself --------------

def _plain(value: Any) -> Any:
    """Drop ansible-core 2.19's ``{"__ansible_unsafe": ...}`` wrappers from ``--list`` output."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def inventory(path: Path) -> subprocess.CompletedProcess:
    """``ansible-inventory --list`` of the inventory folder ``path`` (through the gpucluster plugin)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    return subprocess.run([str(ANSIBLE_INVENTORY), "-i", str(path), "--list"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def hostvars(inv: dict, host: str) -> dict:
    """One host's variables from ``inventory()``'s parsed output."""
    return _plain(inv["_meta"]["hostvars"][host])


def role_vars(inventory: Path, host: str, expression: str, extra: dict | None = None) -> Any:
    """``expression`` over the kubernetes_node role's vars for ``host`` of ``inventory`` (the inventory
    plugin's variables, and ``extra`` as extra vars), as Ansible evaluates it on the controller: no host is
    contacted."""
    out = inventory / "role-vars.json"
    (inventory / "play.yml").write_text(f"""
- hosts: {host}
  gather_facts: false
  connection: local
  tasks:
    - ansible.builtin.include_vars: {REPO}/roles/kubernetes_node/vars/main.yml
    - ansible.builtin.copy:
        content: "{{{{ {expression} | to_json }}}}"
        dest: {out}
        mode: "0600"
""")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    extra_args = ["-e", json.dumps(extra)] if extra else []
    proc = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(inventory / "play.yml"),
                           "-e", f"ansible_python_interpreter={sys.executable}", *extra_args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())
