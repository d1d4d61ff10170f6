"""A converged ``up`` skips a stack only while everything ``pulumi up`` compares is byte-identical.

The fingerprint (:mod:`gpucluster.pulumi.fingerprint`) covers the stack plan and local charts, the
provider's kubeconfig and context, the cluster's identity, the program, SDKs, binaries and environment,
and the stack's state files. Each test here changes exactly one of those after a recorded update and
sees the engine run again; the recorded update itself comes from :meth:`Engine.run` over a stand-in for
the Automation API stack (the live proof, with the real engine, is in tests/integration/test_stacks.py).
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpucluster import flow
from gpucluster.errors import StackFailed
from gpucluster.pulumi import engine as engine_mod
from gpucluster.pulumi import fingerprint
from gpucluster.pulumi.engine import Engine
from gpucluster.pulumi.plan import ChartSource, ClusterFacts, Skipped, StackPlan, plan
from gpucluster.render import render

REPO = Path(__file__).resolve().parents[2]
PROBE_CHART = REPO / "tests" / "fixtures" / "charts" / "gpucluster-probe"
UID = "3f1c-kube-system-uid"


@pytest.fixture(scope="module")
def plans(local_spec) -> dict[str, StackPlan]:
    return plan(render(local_spec), ClusterFacts())


class Setup:
    """An engine over a temporary state folder, with stand-in binaries, a kubeconfig and program sources."""

    def __init__(self, tmp: Path, base: StackPlan, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp, self.monkeypatch = tmp, monkeypatch
        self.cli, self.provider = tmp / "bin" / "pulumi", tmp / "bin" / "pulumi-resource-kubernetes"
        for b in (self.cli, self.provider):
            b.parent.mkdir(exist_ok=True)
            b.write_text("#!/bin/sh\n")
        self.kubeconfig = tmp / "kubeconfig"
        self.kubeconfig.write_text("apiVersion: v1\nclusters: [{name: a, cluster: {server: 'https://127.0.0.1:6443'}}]\n")
        self.sources = tmp / "src"
        self.sources.mkdir()
        (self.sources / "programs.py").write_text("def platform(): ...\n")
        monkeypatch.setattr(engine_mod, "find_binaries", lambda: (self.cli, self.provider, False))
        monkeypatch.setattr(fingerprint, "PACKAGE", self.sources)
        monkeypatch.delenv("PULUMI_K8S_CLIENT_TIMEOUT", raising=False)
        monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
        self.plan = copy.deepcopy(base)
        self.context: str | None = None
        self.uid = UID
        self.stack = FakeStack(tmp / "state", resources=41)

    @property
    def engine(self) -> Engine:
        """A new Engine for each use, as each ``up`` makes one (it reads the environment once)."""
        engine = Engine(self.tmp / "state", "local")
        self.monkeypatch.setattr(engine, "_stack", lambda name, program: self.stack)
        return engine

    def inputs(self) -> str | None:
        return self.engine.inputs("platform", self.plan, str(self.kubeconfig), self.context, self.uid)

    def update(self) -> Any:
        """One ``up`` through Engine.run, over a stand-in stack that writes the checkpoint as the engine would."""
        return self.engine.run("platform", "up", lambda: None, inputs=self.inputs())

    def converged(self) -> Any:
        return self.engine.converged("platform", self.inputs())


class FakeStack:
    """What Engine.run drives: ``up``/``destroy`` write a new checkpoint and report a summary event."""

    def __init__(self, state: Path, resources: int, fail: bool = False) -> None:
        self.state, self.resources, self.fail, self.calls = state, resources, fail, []

    def _write(self, kind: str) -> None:
        folder = self.state / "backend" / ".pulumi" / "stacks" / "gpucluster-platform"
        folder.mkdir(parents=True, exist_ok=True)
        resources = [{"urn": f"urn:{kind}:{i}"} for i in range(self.resources if kind == "up" else 0)]
        n = len(self.calls)
        (folder / "local.json").write_text(json.dumps({"checkpoint": {"latest": {"resources": resources,
                                                                                  "serial": n}}}))

    def _op(self, kind: str, on_event: Callable[[Any], None], **_: Any) -> None:
        self.calls.append(kind)
        self._write(kind)
        if self.fail:
            from pulumi.automation import CommandResult
            from pulumi.automation.errors import CommandError

            raise CommandError(CommandResult(stdout="", stderr="error: boom", code=1))
        on_event(SimpleNamespace(summary_event=SimpleNamespace(resource_changes={"same": self.resources}),
                                 diagnostic_event=None))

    def up(self, **kw: Any) -> None:
        self._op("up", **kw)

    def preview(self, **kw: Any) -> None:
        self.calls.append("preview")
        kw["on_event"](SimpleNamespace(summary_event=SimpleNamespace(resource_changes={"same": 1}),
                                       diagnostic_event=None))

    def destroy(self, **kw: Any) -> None:
        self._op("destroy", **kw)


@pytest.fixture
def s(tmp_path: Path, plans: dict[str, StackPlan], monkeypatch: pytest.MonkeyPatch) -> Setup:
    return Setup(tmp_path, plans["platform"], monkeypatch)


def test_an_update_with_the_same_inputs_and_state_is_converged_with_its_resource_count(s: Setup):
    assert s.converged() is None  # nothing recorded yet: the engine must run
    counts = s.update()
    assert s.stack.calls == ["up"] and counts.inputs_unchanged is False
    again = s.converged()
    assert again is not None and again.inputs_unchanged is True
    assert again.as_dict() | {"seconds": 0} == {"stack": "platform", "operation": "up", "seconds": 0, "created": 0,
                                                "updated": 0, "deleted": 0, "same": 41, "imported": 0,
                                                "inputs_unchanged": True}


def _edit_object(s: Setup) -> None:
    (cm,) = [o for o in s.plan.components["gpu-operator"] if o["metadata"]["name"] == "gpucluster-mig-parted-config"]
    cm["data"]["config.yaml"] += "\n# one byte more\n"


def _edit_release_values(s: Setup) -> None:
    (src,) = s.plan.releases["gpu-operator"]
    src.release.values["driver"]["enabled"] = not src.release.values["driver"]["enabled"]


def _local_chart(s: Setup) -> Callable[[], None]:
    chart = s.tmp / "charts" / "gpucluster-probe"
    shutil.copytree(PROBE_CHART, chart)
    (src,) = s.plan.releases["volcano"]
    s.plan.releases["volcano"] = [ChartSource(src.release, chart)]

    def edit() -> None:
        template = sorted((chart / "templates").iterdir())[0]
        template.write_text(template.read_text() + "\n# a changed template\n")
    return edit


def _edit_env(name: str, value: str) -> Callable[[Setup], None]:
    return lambda s: s.monkeypatch.setenv(name, value)


def _grow(path_of: Callable[[Setup], Path]) -> Callable[[Setup], None]:
    def edit(s: Setup) -> None:
        path = path_of(s)
        path.write_text(path.read_text() + "# rebuilt\n")
    return edit


def _checkpoint(s: Setup) -> Path:
    return s.tmp / "state" / "backend" / ".pulumi" / "stacks" / "gpucluster-platform" / "local.json"


CHANGES: dict[str, Callable[[Setup], None]] = {
    # the stack plan
    "an object's data": _edit_object,
    "a release's values": _edit_release_values,
    "an adopted object": lambda s: s.plan.adopt.update({"configmap/monitoring/theirs": "monitoring/theirs"}),
    "a skipped object": lambda s: s.plan.skipped.append(Skipped("platform", "Queue q", "not served")),
    "a node patch": lambda s: s.plan.node_patches[0]["metadata"]["labels"].update({"extra": "1"}),
    # the provider's settings and the cluster
    "the kubeconfig path": lambda s: (s.kubeconfig.rename(s.tmp / "kc2"), setattr(s, "kubeconfig", s.tmp / "kc2")),
    "the kubeconfig's content": _grow(lambda s: s.kubeconfig),
    "the context": lambda s: setattr(s, "context", "other"),
    "the cluster (a rebuilt one at the same address)": lambda s: setattr(s, "uid", "another-uid"),
    # the program, SDKs, binaries, environment
    "a source file of the program": _grow(lambda s: s.sources / "programs.py"),
    "a new source file": lambda s: (s.sources / "new.py").write_text("X = 1\n"),
    "the Pulumi SDK": lambda s: s.monkeypatch.setattr(fingerprint, "sdk_versions",
                                                      lambda: {"pulumi": "3.999.0", "pulumi_kubernetes": "4.25.0"}),
    "the CLI binary": _grow(lambda s: s.cli),
    "the provider binary": _grow(lambda s: s.provider),
    "a provider setting from the environment": _edit_env("PULUMI_K8S_CLIENT_TIMEOUT", "5"),
    "the secrets passphrase": _edit_env("PULUMI_CONFIG_PASSPHRASE", "another"),
    "a Helm setting": _edit_env("HELM_DRIVER", "configmap"),
    # the stack's state
    "the checkpoint (edited by another command)": lambda s: _checkpoint(s).write_text(
        _checkpoint(s).read_text().replace('"serial": 1', '"serial": 7')),
    "the stack settings file": lambda s: (s.engine.work_dir("platform") / "Pulumi.local.yaml").write_text(
        "encryptionsalt: v1:other\n"),
    "a compressed checkpoint beside it": lambda s: _checkpoint(s).with_suffix(".json.gz").write_bytes(b"\x1f\x8b"),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_any_change_runs_the_stack_again(s: Setup, change: str):
    s.update()
    assert s.converged() is not None  # converged before the change ...
    CHANGES[change](s)
    assert s.converged() is None, f"{change}: the stack would be skipped"  # ... and no longer after it
    s.update()
    assert s.stack.calls == ["up", "up"]
    assert s.converged() is not None  # the new update is the one recorded


def test_a_local_charts_files_take_part(s: Setup):
    edit = _local_chart(s)
    s.update()
    assert s.converged() is not None
    edit()
    assert s.converged() is None


def test_a_failed_update_forgets_the_last_record(s: Setup):
    s.update()
    assert s.converged() is not None
    s.stack.fail = True
    with pytest.raises(StackFailed):
        s.update()
    s.stack.fail = False
    # The checkpoint the failed update wrote matches no record, and the record itself is gone: an
    # interrupted run (whose state then differs from the record's) is never taken for a converged one.
    assert not (s.engine.work_dir("platform") / fingerprint.RECORD).exists()
    assert s.converged() is None


def test_a_destroy_forgets_and_a_preview_keeps_the_record(s: Setup):
    s.update()
    s.engine.run("platform", "preview", lambda: None)
    assert s.converged() is not None
    s.engine.run("platform", "destroy", lambda: None)
    assert s.stack.calls == ["up", "preview", "destroy"]
    assert s.converged() is None


@pytest.mark.parametrize("unknown", ["no cluster identity", "no provider binary of ours"])
def test_an_unknown_part_always_runs_the_engine(s: Setup, monkeypatch: pytest.MonkeyPatch, unknown: str):
    if unknown == "no cluster identity":
        s.uid = ""
    else:
        monkeypatch.setattr(engine_mod, "find_binaries", lambda: (s.cli, None, True))
    assert s.inputs() is None
    s.update()
    assert not (s.engine.work_dir("platform") / fingerprint.RECORD).exists()
    assert s.converged() is None


def test_up_reports_a_skipped_stack_as_unchanged_inputs(s: Setup, monkeypatch: pytest.MonkeyPatch):
    s.update()
    program_ran: list[int] = []
    counts = flow._apply(s.engine, "platform", s.plan, lambda: program_ran.append(1), s.kubeconfig, None, UID,
                         dry_run=False)
    assert s.stack.calls == ["up"] and not program_ran  # the engine did not run
    line = flow._counts_line(counts.as_dict())
    assert line == "platform: unchanged (inputs identical to the last update): 41 resources as that update left them"
    # A preview always runs, and a changed input runs the update.
    flow._apply(s.engine, "platform", s.plan, lambda: None, s.kubeconfig, None, UID, dry_run=True)
    flow._apply(s.engine, "platform", s.plan, lambda: None, s.kubeconfig, "other-context", UID, dry_run=False)
    assert s.stack.calls == ["up", "preview", "up"]


def test_the_summary_names_a_stack_the_engine_did_not_run(monkeypatch: pytest.MonkeyPatch, capsys):
    from gpucluster.cli import entrypoint

    report = flow.Report("local", "up")
    report.stacks = [{"stack": "platform", "created": 0, "updated": 0, "deleted": 0, "same": 41, "seconds": 0.0,
                      "inputs_unchanged": True},
                     {"stack": "tenants", "created": 0, "updated": 1, "deleted": 0, "same": 35, "seconds": 2.0,
                      "inputs_unchanged": False}]
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: report)
    assert entrypoint(["up", "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "platform: unchanged (inputs identical to the last update); the engine did not run" in out
    assert "tenants: unchanged" not in out
