"""The kubernetes_node role's air-gapped binary checks (tasks/local-checks.yml), run on the controller only.

The checks are read-only and delegated to localhost, so they run here without a host: pinned SHA-256s that
match pass; a differing or missing pinned binary fails naming the file, both hashes and how to fix it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    bins = tmp_path / "bin"
    bins.mkdir()
    for name in ("kubeadm", "kubelet"):
        (bins / name).write_bytes(f"#!/bin/sh\necho {name}\n".encode())
    return bins


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_checks(tmp_path: Path, folder: Path, pins: dict[str, str]) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text(f"""
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - ansible.builtin.include_tasks: {REPO}/roles/kubernetes_node/tasks/local-checks.yml
""")
    extra = {"kubernetes_node_local_dir": str(folder), "kubernetes_node_local_sha256": pins,
             "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(play), "-e", json.dumps(extra)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_pinned_binaries_that_match_pass(tmp_path: Path, folder: Path) -> None:
    # a folder of links to the built binaries (what the Molecule tests and the toolchain cache give) counts
    built = tmp_path / "built-kubeadm"
    (folder / "kubeadm").rename(built)
    (folder / "kubeadm").symlink_to(built)
    pins = {"kubeadm": sha(folder / "kubeadm"), "kubelet": sha(folder / "kubelet").upper()}
    proc = run_checks(tmp_path, folder, pins)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_binary_that_differs_from_its_pin_fails_naming_both_hashes(tmp_path: Path, folder: Path) -> None:
    pinned = sha(folder / "kubelet")
    (folder / "kubelet").write_bytes(b"#!/bin/sh\necho tampered\n")
    proc = run_checks(tmp_path, folder, {"kubeadm": sha(folder / "kubeadm"), "kubelet": pinned})
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"{folder}/kubelet does not match kubernetes_node_local_sha256.kubelet ({pinned})" in out, out[-3000:]
    assert sha(folder / "kubelet") in out and "Nothing was copied" in out


def test_a_pinned_binary_that_is_missing_fails(tmp_path: Path, folder: Path) -> None:
    proc = run_checks(tmp_path, folder, {"kubectl": "0" * 64})
    assert proc.returncode != 0
    assert f"{folder}/kubectl does not match kubernetes_node_local_sha256.kubectl" in proc.stdout + proc.stderr
