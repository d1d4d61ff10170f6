"""docs/real-cluster.md's commands, up to the hosts, run as written and print what the page shows.

Blocks are marked in the page with an HTML comment right before them:

- ``<!-- doc-test: run -->`` (or ``run, exit N``) before a ``sh`` block: each line is run in a scratch
  folder (``gpucluster`` is this checkout's CLI); the block must exit 0 (or N), and when a ``text``
  block follows, its lines must be the output (stdout and stderr as a terminal shows them), after
  normalising what differs between runs: timings, the scratch folder (shown as /home/ops/gpucluster)
  and ssh's reason for an unreachable address. A ``...`` line stands for any lines.
- ``<!-- doc-test: edit PATH -->`` before a ``diff`` block: its ``-`` lines are replaced by its ``+``
  lines in PATH, as the reader would edit the file.

The scaffold's hosts have documentation addresses (192.0.2.0/24, RFC 5737), which reach nothing: the
`up --dry-run` block tries SSH to them and reports each as unreachable.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "real-cluster.md"
SHOWN_CWD = "/home/ops/gpucluster"
MARK = re.compile(r"<!-- doc-test: (?P<what>run|edit)(?:, exit (?P<exit>\d+))?(?: (?P<path>\S+))? -->\n"
                  r"```(?P<lang>\w+)\n(?P<body>.*?)```\n(?:\n```text\n(?P<out>.*?)```\n)?", re.DOTALL)


@dataclass
class Step:
    what: str
    body: str
    exit: int = 0
    path: str = ""
    out: str | None = None


def steps() -> list[Step]:
    text = DOC.read_text()
    found = [Step(m["what"], m["body"], int(m["exit"] or 0), m["path"] or "", m["out"]) for m in MARK.finditer(text)]
    assert len(found) == text.count("<!-- doc-test:"), "a doc-test marker is not followed by a fenced block"
    return found


def normalise(text: str, cwd: Path, state: Path | None = None) -> list[str]:
    text = text.replace(str(cwd), SHOWN_CWD)
    if state is not None:  # the test's GPUCLUSTER_STATE, shown as the default state folder
        text = text.replace(str(state), "~/.local/state/gpucluster")
    text = re.sub(r"\(\d+(\.\d+)? s\)", "(N s)", text)
    text = re.sub(r" in \d+\.\d+s$", " in Ns", text, flags=re.MULTILINE)
    text = re.sub(r"(port 22: )[^(]*?( \(check)", r"\1<ssh error>\2", text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def matches(shown: list[str], got: list[str]) -> bool:
    """``shown`` equals ``got``, a ``...`` line in it standing for any number of lines."""
    if not shown:
        return not got
    if shown[0] == "...":
        return any(matches(shown[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and shown[0] == got[0] and matches(shown[1:], got[1:])


def run_line(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[0] == "gpucluster", f"only gpucluster commands run here: {line}"
    return subprocess.run([sys.executable, "-m", "gpucluster", *argv[1:]], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, check=False)


def test_the_page_marks_the_steps_up_to_the_hosts():
    kinds = [(s.what, s.body.split()[1] if s.what == "run" else s.path) for s in steps()]
    assert kinds == [("run", "init"), ("edit", "inventories/prod/cluster.yaml"), ("run", "validate"),
                     ("run", "render"), ("run", "up")]


def test_every_marked_command_runs_as_the_page_shows(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path / "home"), "GPUCLUSTER_STATE": str(tmp_path / "state"),
           "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("KUBECONFIG", None)
    env.pop("GPUCLUSTER_ANSIBLE_DIR", None)
    cwd = tmp_path / "gpucluster"
    cwd.mkdir()
    for step in steps():
        if step.what == "edit":
            target = cwd / step.path
            text = target.read_text()
            old = "".join(line[1:] + "\n" for line in step.body.splitlines() if line.startswith("-"))
            new = "".join(line[1:] + "\n" for line in step.body.splitlines() if line.startswith("+"))
            assert text.count(old) == 1, f"{step.path} does not hold the lines the page removes:\n{old}"
            target.write_text(text.replace(old, new))
            continue
        lines = [line for line in step.body.splitlines() if line.strip() and not line.startswith("#")]
        outputs, codes = [], []
        for line in lines:
            proc = run_line(line, cwd, env)
            outputs.append(proc.stdout)
            codes.append(proc.returncode)
        got = normalise("".join(outputs), cwd, tmp_path / "state")
        assert codes[-1] == step.exit and all(c == 0 for c in codes[:-1]), (step.body, codes, "\n".join(got))
        if step.out is not None:
            shown = normalise(step.out, cwd)
            assert matches(shown, got), "the page shows:\n" + "\n".join(shown) + "\n\nthe command printed:\n" \
                + "\n".join(got)
