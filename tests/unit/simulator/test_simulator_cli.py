"""The simulator's command line and process records, offline."""

from __future__ import annotations


def test_cli_errors_are_one_clear_line(tmp_path, cli) -> None:
    # A kubeconfig the user names is input: exit 2 (it was 1 before the errors were unified).
    out = cli("local", "gpus", "sync", "--kubeconfig", str(tmp_path / "nope"))
    assert out.exit_code == 2 and "kubeconfig" in out.output and "local up" in out.output
    assert "Traceback" not in out.output
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: is: not a kubeconfig")
    out = cli("local", "gpus", "sync", "--kubeconfig", str(bad))
    assert out.exit_code == 2 and "not usable" in out.output
    out = cli("local", "gpus", "fault", "l4-1", "melted", "--kubeconfig", str(bad))
    assert out.exit_code == 2 and "melted" in out.output


def test_stopping_the_simulator_never_kills_a_process_that_is_not_ours(tmp_path) -> None:
    import os
    import sys
    import time

    import pytest

    from gpucluster.addons import gpu_simulator
    from gpucluster.errors import LocalWorldError
    from gpucluster.local import addons
    from gpucluster.procs import Component

    # A record whose pid now belongs to another process (this test run): not ours, never signalled.
    addons.record(tmp_path, gpu_simulator.NAME, {gpu_simulator.NAME: Component(
        gpu_simulator.NAME, os.getpid(), sys.executable, ["-m", "gpucluster"], "", time.time())})
    assert addons.stop(tmp_path, gpu_simulator.NAME) == []
    assert addons.load(tmp_path, gpu_simulator.NAME) == {}  # the stale record is gone
    (addons.folder(tmp_path, gpu_simulator.NAME) / addons.RECORD).write_text("garbage")
    with pytest.raises(LocalWorldError, match="corrupt"):
        addons.stop(tmp_path, gpu_simulator.NAME)
