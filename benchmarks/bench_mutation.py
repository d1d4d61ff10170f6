"""Mutation testing of ``src/gpucluster/verify/``: the share of mutants the verify tests kill.

    python benchmarks/bench_mutation.py                       # every module of src/gpucluster/verify/
    python benchmarks/bench_mutation.py --only model.py --only report.py   # a few while developing
    python benchmarks/bench_mutation.py --survivors           # also list each surviving mutant

Needs mutmut (``pip install -e '.[bench]'``, or ``pip install 'mutmut==3.8.1'``). The tool is mutmut, not
cosmic-ray, because of how it runs: it first records which tests reach which function, then runs, for each
mutant, only those tests, in a process forked from one that has already imported everything, stopping at
the first failing test (``-x``). cosmic-ray starts the test command afresh for every mutant; here, with
the verify tests importing the spec model, the render core and the CEL engine, that costs seconds per
mutant before a test runs, and src/gpucluster/verify/ yields thousands of mutants on a 2-core machine.

The repository is copied to a temporary folder (mutmut writes its ``mutants/`` tree next to the
sources), mutmut runs there over ``src/gpucluster/verify/`` with the verify unit tests
(:data:`TESTS`), and the figure printed is mutmut's own score: killed (and timed-out) mutants over every
mutant but the skipped ones. A mutant no test reaches counts as not killed. The run's wall time is
printed too; it is a benchmark, not a test: run it after changing verify or its tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The verify tests: unit tests over recorded snapshots, scripted hosts and recorded node objects.
TESTS = ["tests/unit/test_verify.py", "tests/unit/test_verify_faults.py", "tests/unit/test_verify_health.py",
         "tests/unit/test_verify_helm.py", "tests/unit/test_verify_hosts.py", "tests/unit/test_verify_ssh.py",
         "tests/unit/test_check_coverage.py", "tests/unit/test_watchdog.py", "tests/unit/test_dra.py",
         "tests/unit/test_up_verify_step.py", "tests/unit/test_verify_report.py",
         "tests/unit/test_verify_pytest_plugin.py", "tests/unit/test_verify_sources.py"]
#: What the tests read besides the sources and tests (mutmut copies src/ and tests/ itself).
ALSO_COPY = ["inventories", "docs", "README.md", "playbooks", "plugins", "molecule", "ansible.cfg"]


def config(only: list[str]) -> str:
    mutate = [f"src/gpucluster/verify/{name}" for name in only] or ["src/gpucluster/verify/*"]
    lines = ["", "[tool.mutmut]", 'source_paths = ["src/"]', f"only_mutate = {json.dumps(mutate)}",
             f"pytest_add_cli_args_test_selection = {json.dumps(TESTS)}",
             'pytest_add_cli_args = ["-p", "no:cacheprovider"]', f"also_copy = {json.dumps(ALSO_COPY)}",
             "use_git_change_detection = false"]
    return "\n".join(lines) + "\n"


def copy_repo(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for rel in files:
        src = REPO / rel
        if src.is_file() and not rel.startswith(("mutants/", ".venv/")):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run_mutmut(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # mutmut puts mutants/src first itself
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=work, env=env, text=True,
                          capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="FILE",
                        help="mutate only these modules of src/gpucluster/verify/ (e.g. model.py; repeatable)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--survivors", action="store_true", help="list every mutant that survived")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (mutmut browse)")
    args = parser.parse_args()
    try:
        import mutmut  # noqa: F401  (the run itself goes through `python -m mutmut`)
    except ImportError:
        print("mutmut is not installed: pip install -e '.[bench]' (or pip install 'mutmut==3.8.1')", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpucluster-mutation-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        copy_repo(work)
        (work / "pyproject.toml").write_text((work / "pyproject.toml").read_text() + config(args.only))
        run = run_mutmut(work, "run", "--max-children", str(args.max_children))
        if run.returncode != 0:
            print(run.stdout[-4000:], run.stderr[-4000:], sep="\n", file=sys.stderr)
            return 1
        run_mutmut(work, "export-cicd-stats")
        stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
        survivors = [line.split(":")[0] for line in run_mutmut(work, "results").stdout.splitlines()
                     if line.strip().endswith(("survived", "no tests"))]
    elapsed = time.monotonic() - started
    tested = stats["total"] - stats["skipped"]
    killed = stats["killed"] + stats["timeout"]
    share = 100.0 * killed / tested if tested else 0.0
    scope = ", ".join(args.only) or "src/gpucluster/verify/"
    print(f"mutation testing of {scope} with mutmut, {len(TESTS)} test files")
    print(f"mutants {stats['total']}: killed {stats['killed']}, timeout {stats['timeout']}, survived "
          f"{stats['survived']}, no tests {stats['no_tests']}, skipped {stats['skipped']}, suspicious "
          f"{stats['suspicious']}")
    print(f"killed: {share:.1f}% ({killed} of {tested}) in {elapsed:.0f} s")
    if args.survivors:
        print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
