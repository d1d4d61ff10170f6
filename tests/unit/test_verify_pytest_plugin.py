"""The pytest suite's plugin decides as `gpucluster verify` does: the same rows, the same allowances, bad
input stops the session with exit code 2. (The suite against a live cluster: test_verify_live.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from verify_faults import recorded

from gpucluster.verify import checks, pytest_plugin
from gpucluster.verify.model import Verdict

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"


class Config:
    """What the plugin reads of a pytest config: its options and its stash."""

    def __init__(self, **options: Any) -> None:
        self.options = {"--gpucluster-inventory": str(LOCAL), "--gpucluster-kubeconfig": None,
                        "--gpucluster-context": None, "--gpucluster-metrics-url": [],
                        "--gpucluster-allow-not-measured": [], **options}
        self.stash = pytest.Stash()

    def getoption(self, name: str) -> Any:
        return self.options[name]


def test_the_local_inventory_gets_the_local_worlds_allowances_and_the_users() -> None:
    config = Config(**{"--gpucluster-allow-not-measured": ["tenant-queue"]})
    assert pytest_plugin.allowed(config) == {**checks.LOCAL_WORLD, "tenant-queue": checks.BY_USER}
    with pytest.raises(pytest.skip.Exception, match=r"not measured \(the local world installs no chart from a "
                                                    r"repository \(none can be fetched\)\): no record"):
        pytest_plugin.unmeasured(config, "charts-installed", "no record")
    with pytest.raises(pytest.fail.Exception, match=r"not measured: no exporter \(--gpucluster-allow-not-measured "
                                                    r"gpu-health accepts it\)"):
        pytest_plugin.unmeasured(config, "gpu-health", "no exporter")


def test_an_unknown_check_id_stops_the_session_with_exit_2() -> None:
    config = Config(**{"--gpucluster-allow-not-measured": ["gpu-healthy"]})
    with pytest.raises(pytest.exit.Exception) as stopped:
        pytest_plugin.allowed(config)
    assert stopped.value.returncode == 2
    assert "gpucluster suite: --gpucluster-allow-not-measured: unknown check id(s) gpu-healthy" in str(stopped.value)


def test_no_inventory_stops_the_session_naming_the_option() -> None:
    with pytest.raises(pytest.exit.Exception, match="pass --gpucluster-inventory") as stopped:
        pytest_plugin.spec_of(Config(**{"--gpucluster-inventory": None}))
    assert stopped.value.returncode == 2


def test_the_suites_rows_are_verifys_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpucluster.verify import certs, cluster, watchdog
    from gpucluster.verify.model import ok

    seen: dict[str, Any] = {}
    shaken: list[Any] = []

    def fetch(spec: Any, kubeconfig: Any, context: Any, **kw: Any) -> Any:
        seen.update(kw, kubeconfig=kubeconfig, context=context)
        return recorded("local-world")

    monkeypatch.setattr(cluster, "fetch", fetch)
    monkeypatch.setattr(watchdog, "live_rows", lambda *a, **k: [ok("mig-reconfig", "a100-1", "success", "success")])
    cert_row = ok("control-plane-certificates", "apiserver/127.0.0.1:6443", "valid", "valid")
    monkeypatch.setattr(certs, "rows", lambda kc, ctx, fix: shaken.append((kc, ctx, fix)) or [cert_row])
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("unused: the snapshot is recorded\n")
    config = Config(**{"--gpucluster-kubeconfig": str(kubeconfig), "--gpucluster-context": "ctx",
                       "--gpucluster-metrics-url": ["http://exporter/metrics"]})
    rows = pytest_plugin.cluster_results(config)
    assert seen == {"metrics_urls": ["http://exporter/metrics"], "simulated": True, "kubeconfig": kubeconfig,
                    "context": "ctx"}
    assert rows[-2].check == "mig-reconfig"  # the watchdog's rows follow the snapshot's
    assert rows[-1] is cert_row  # and the certificates' row, read from the same kubeconfig and context, is last
    assert shaken == [(kubeconfig, "ctx", certs.fix_for(pytest_plugin.spec_of(config)))]
    want = cluster.run(pytest_plugin.spec_of(config), recorded("local-world"), charts_reachable=False, simulated=True)
    assert rows[:-2] == want
    assert {r.check for r in rows if r.verdict is Verdict.skipped} == set(checks.LOCAL_WORLD)
    assert pytest_plugin.cluster_results(config) is rows  # asked once per session
