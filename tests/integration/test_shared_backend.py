"""Stack state shared between runners in an S3-compatible object store (issue 29, item 1).

A real S3 server (moto's standalone server, in a virtualenv of its own: its boto libraries pin a
python-dateutil older than the one the Kubernetes client needs) listens on loopback; the real Pulumi CLI
keeps the stacks in one of its buckets (`--backend s3://...`). Runners are `gpucluster up` processes with
separate state folders (separate work dirs, as on fresh CI machines) against the module's local world:
the first creates everything, a second runner finds nothing to change, a run while another holds the
stack is refused naming the holder, and a runner with another passphrase is refused before the cluster
is touched (the ResourceQuota's resourceVersion is unchanged).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local"
LOCAL_WORLD = {"tools": ("pulumi", "pulumi-resource-kubernetes")}
#: The S3 server: moto's standalone server at this version, in ~/.cache/gpucluster/venvs (scripts/test.sh).
MOTO = Path.home() / ".cache" / "gpucluster" / "venvs" / "moto-5.2.5" / "bin" / "moto_server"
BUCKET = "gpucluster-state"
PASSPHRASE = "the-runners-passphrase"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """A running S3 server with an empty bucket; the backend URL of that bucket."""
    if not (MOTO.parents[1] / ".complete").exists():
        reason = f"no S3 server: {MOTO} (scripts/test.sh makes it: python3 -m venv, pip install 'moto[server]==5.2.5')"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    port = _free_port()
    server = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        def bucket_made() -> bool:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/{BUCKET}", method="PUT")
                return urllib.request.urlopen(req, timeout=2).status == 200
            except OSError:
                return False

        wait_for("the S3 server to take a bucket", bucket_made, timeout=60, every=0.2)
        yield f"s3://{BUCKET}?endpoint=http://127.0.0.1:{port}&s3ForcePathStyle=true&region=us-east-1"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _locks(backend: str) -> list[str]:
    endpoint = backend.split("endpoint=", 1)[1].split("&", 1)[0]
    with urllib.request.urlopen(f"{endpoint}/{BUCKET}?list-type=2&prefix=.pulumi/locks/", timeout=5) as r:
        body = r.read().decode()
    return [k.split("</Key>", 1)[0] for k in body.split("<Key>")[1:]]


def runner(lw: Cluster, backend: str, state: Path, *extra: str, inventory: Path = LOCAL,
           passphrase: str = PASSPHRASE) -> subprocess.Popen:
    """`gpucluster up` as one CI runner would start it: its own state folder, the shared backend."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
           "PULUMI_CONFIG_PASSPHRASE": passphrase}
    env.pop("PULUMI_BACKEND_URL", None)
    return subprocess.Popen([sys.executable, "-m", "gpucluster", "up", "-i", str(inventory), "--kubeconfig",
                             str(lw.kubeconfig), "--backend", backend, "--state-dir", str(state),
                             "--no-chart-repositories", "--no-verify", *extra],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _changes(out: str) -> list[tuple[str, int, int, int]]:
    return [(s["stack"], s["created"], s["updated"], s["deleted"]) for s in json.loads(out)["stacks"]]


QUOTA = "/api/v1/namespaces/ml-research/resourcequotas/gpucluster-quota"


def test_a_second_runner_sharing_the_backend_changes_nothing(lw: Cluster, s3: str, tmp_path: Path) -> None:
    rc, out, err = _done(runner(lw, s3, tmp_path / "runner-a", "-o", "json"))
    assert rc == 0, err[-3000:]
    assert all(created > 0 for _, created, _, _ in _changes(out)), out
    assert not (tmp_path / "runner-a" / "backend").exists()  # the state is in the bucket, not on the runner
    rc, out, err = _done(runner(lw, s3, tmp_path / "runner-b", "-o", "json"))
    assert rc == 0, err[-3000:]
    assert _changes(out) == [("platform", 0, 0, 0), ("tenants", 0, 0, 0)]


def test_another_passphrase_is_refused_before_the_cluster_is_touched(lw: Cluster, s3: str, tmp_path: Path) -> None:
    before = lw.get("resourcequota", "-n", "ml-research", "gpucluster-quota")["metadata"]["resourceVersion"]
    variant = tmp_path / "more-gpus"  # a run that would change the cluster if it went on
    variant.mkdir()
    data = yaml.safe_load((LOCAL / "cluster.yaml").read_text())
    data["tenants"][0]["quota"]["gpus"] = 20
    (variant / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rc, _, err = _done(runner(lw, s3, tmp_path / "runner-c", inventory=variant, passphrase="not-the-one"))
    assert rc == 2, err[-3000:]
    assert "PULUMI_CONFIG_PASSPHRASE does not open the stack state" in err and "Nothing was changed" in err
    assert lw.get("resourcequota", "-n", "ml-research", "gpucluster-quota")["metadata"]["resourceVersion"] == before
    # the right passphrase on a fresh runner still opens it: the refused runner left the shared salt alone
    rc, out, err = _done(runner(lw, s3, tmp_path / "runner-d", "-o", "json"))
    assert rc == 0 and _changes(out) == [("platform", 0, 0, 0), ("tenants", 0, 0, 0)], err[-3000:]


def test_a_run_while_another_holds_the_stack_is_refused_naming_it(lw: Cluster, s3: str, tmp_path: Path) -> None:
    variant = tmp_path / "more-gpus"
    variant.mkdir()
    data = yaml.safe_load((LOCAL / "cluster.yaml").read_text())
    data["tenants"][0]["quota"]["gpus"] = 24
    (variant / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    first = runner(lw, s3, tmp_path / "runner-e", "-o", "json", inventory=variant)
    stopped: list[int] = []
    try:
        wait_for("the first runner to lock a stack", lambda: _locks(s3), timeout=300, every=0.1)
        # The lock is held only while the engine runs: the first runner's processes are paused while it is
        # held, so the second meets it however fast the first would be.
        engines = [first.pid, *_children(first.pid)]
        for pid in engines:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        assert _locks(s3), "the lock went before the first runner was paused"
        rc, _, err = _done(runner(lw, s3, tmp_path / "runner-f", inventory=variant))
        assert rc == 1, err[-3000:]
        assert "another run is updating it in s3://" in err and "nothing was changed" in err, err[-3000:]
        assert any(f"(pid {pid}) at " in err for pid in engines), (engines, err[-3000:])  # the holder, by pid
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    rc, out, err = _done(first)
    assert rc == 0, err[-3000:]
    assert ("tenants", 0, 1, 0) in _changes(out)
    assert not _locks(s3)
    quota = lw.get("resourcequota", "-n", "ml-research", "gpucluster-quota")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "24"


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the engine and its provider plugins)."""
    found, todo = [], [pid]
    while todo:
        parent = str(todo.pop())
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = stat.read_text().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            if ppid == parent:
                found.append(int(stat.parent.name))
                todo.append(int(stat.parent.name))
    return found
