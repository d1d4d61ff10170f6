"""The repository's linters, as configured in pyproject.toml, .ansible-lint and .yamllint, are clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _lint(*cmd: str) -> subprocess.CompletedProcess:
    tool = BIN / cmd[0]
    if not tool.exists() and shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed: pip install -e '.[test]'")
    return subprocess.run([str(tool) if tool.exists() else cmd[0], *cmd[1:]], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff():
    proc = _lint("ruff", "check", "--output-format", "concise", "src", "tests", "benchmarks", "plugins", "stacks")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_yamllint():
    proc = _lint("yamllint", "--strict", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def ansible_lint_key(repo: Path = REPO) -> str:
    """What an ansible-lint verdict depends on, as one digest: every file git knows or would add (tracked,
    and untracked but not ignored, as ansible-lint discovers them) outside .ansible-lint's exclude_paths,
    by name and content, and every installed Python distribution's version (ansible-lint, ansible-core,
    the collections of `ansible`, yamllint, ...). Conservative: a change in any such file, linted or not,
    gives a new key."""
    import hashlib
    import importlib.metadata

    import yaml

    config = yaml.safe_load((repo / ".ansible-lint").read_text()) or {}
    excluded = tuple(str(p).rstrip("/") + "/" for p in config.get("exclude_paths") or [])
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    digest = hashlib.sha256()
    for name in sorted({n for n in listed if n and not n.startswith(excluded)}):
        path = repo / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() and not path.is_symlink() else b"<not a file>")
        digest.update(b"\0")
    for dist in sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()):
        digest.update(dist.encode() + b"\n")
    digest.update(sys.version.encode())
    return digest.hexdigest()


@pytest.mark.slow
def test_ansible_lint_production_profile():
    """ansible-lint over roles/ and playbooks/ (profile production; about 80 CPU-s on the 2-core machine).

    A pass is remembered under :func:`ansible_lint_key` in the toolchain's cache, outside the clone: the
    same files with the same installed versions are not linted again (as mypy's cache does for modules).
    A failure is never remembered: it is linted again and shown in full.
    """
    from gpucluster.toolchain.cache import cache_root

    passed = cache_root() / "ansible-lint" / f"passed-{ansible_lint_key()}"
    if passed.is_file():
        return
    proc = _lint("ansible-lint", "--offline", "roles", "playbooks")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    passed.parent.mkdir(parents=True, exist_ok=True)
    passed.write_text(proc.stdout + proc.stderr)


def test_the_ansible_lint_key_follows_linted_files_and_installed_versions_not_excluded_ones(tmp_path, monkeypatch):
    import importlib.metadata

    repo = tmp_path / "repo"
    (repo / "roles" / "r" / "tasks").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / ".ansible-lint").write_text("exclude_paths:\n  - docs/\n")
    (repo / "roles" / "r" / "tasks" / "main.yml").write_text("- name: A\n  ansible.builtin.debug:\n")
    (repo / "docs" / "x.md").write_text("one\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    first = ansible_lint_key(repo)
    assert ansible_lint_key(repo) == first
    (repo / "docs" / "x.md").write_text("two\n")  # excluded from the lint: same verdict
    assert ansible_lint_key(repo) == first
    (repo / "roles" / "r" / "tasks" / "main.yml").write_text("- name: B\n  ansible.builtin.debug:\n")
    second = ansible_lint_key(repo)
    assert second != first
    (repo / "roles" / "r" / "tasks" / "new.yml").write_text("---\n")  # untracked but not ignored: linted
    third = ansible_lint_key(repo)
    assert third != second
    real = importlib.metadata.distributions

    class Other:
        metadata = {"Name": "ansible-lint"}
        version = "0.0.0-other"

    monkeypatch.setattr(importlib.metadata, "distributions", lambda: [*real(), Other()])
    assert ansible_lint_key(repo) != third  # another version installed


def test_mypy():
    """The package ships py.typed: its annotations must hold (settings and the debt list in pyproject.toml).

    mypy's incremental cache lives with the toolchain's, outside the clone: a module whose source hash
    and whose dependencies' interfaces are unchanged is not checked again (mypy's own rule, the one
    `mypy` from the shell applies with its default .mypy_cache), so a clean clone checks only what
    changed since the last run on this machine (44 s cold, a few seconds warm).
    """
    from gpucluster.toolchain.cache import cache_root

    proc = _lint("mypy", "--cache-dir", str(cache_root() / "mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
