"""Shared setup for the Molecule tests: podman settings, the cached image, air-gapped artifacts.

Everything these tests need is built here on first use and cached per user
(``$GPUCLUSTER_CACHE``): the Debian 12 systemd image (scripts/molecule-image.sh), the NVIDIA Container
Toolkit binaries (scripts/nvidia-container-toolkit-build.sh), kubeadm/kubelet and the binaries the
site scenario writes kubeadm's images from (the toolchain), the site's workload image (busybox), and
the site's GPU stand-in (NVIDIA's device plugin and the NVML stub, from the toolchain).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import gpu_standin
import pytest
from molecule_helpers import SITE_DAY2_TESTS, apt_cache_dirs, keep_journals, left_created, molecule, scenario_env
from site_image import packages as site_image_packages

REPO = Path(__file__).resolve().parents[2]


def _cache() -> Path:
    root = os.environ.get("GPUCLUSTER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), "gpucluster")
    return Path(root)


def _run_script(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed (rc {out.returncode}):\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def machine_lock() -> Iterator[None]:
    """One Molecule run per machine: the scenarios' hosts have fixed container names (gpuc-*), so a second
    checkout's run (another CI job, a developer's run) waits here for the first instead of converging
    the same containers."""
    path = _cache() / "molecule.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another run"
            print(f"\nwaiting for the Molecule run that holds {path} ({holder}) to end", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.truncate(0)
        lock.write(f"pid {os.getpid()}, checkout {REPO}\n")
        lock.flush()
        yield


@pytest.fixture(scope="session")
def molecule_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Environment for `molecule`: podman conf, roles path, image name, apt cache, artifacts."""
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if missing:
        reason = f"Molecule tests need {', '.join(missing)}: apt-get install -y podman runc debootstrap busybox-static"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":  # scripts/test.sh installed them: missing is a failure
            pytest.fail(reason)
        pytest.skip(reason)
    request.getfixturevalue("machine_lock")  # only once there is something to run (never for a skip)
    env = dict(os.environ)
    venv_bin = Path(os.sys.executable).parent
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["GPUCLUSTER_REPO"] = str(REPO)
    env["PY_COLORS"] = "0"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["CONTAINERS_CONF"] = str(REPO / "molecule" / "containers.conf")
    env["ANSIBLE_ROLES_PATH"] = str(REPO / "roles")
    env["ANSIBLE_INVENTORY_PLUGINS"] = str(REPO / "plugins" / "inventory")
    # The podman connection with pipelining and `runc exec` (molecule/plugins/connection/podman.py),
    # found first on this path, as in scripts/molecule-test.sh.
    env["ANSIBLE_CONNECTION_PLUGINS"] = str(REPO / "molecule" / "plugins" / "connection")
    apt = _cache() / "apt"
    for sub in apt_cache_dirs():
        (apt / sub / "partial").mkdir(parents=True, exist_ok=True)
    env["GPUCLUSTER_APT_CACHE"] = str(apt)
    # Where the site scenario's converge keeps the host layer's timed records (molecule/site/converge.yml).
    env["GPUCLUSTER_MOLECULE_REPORTS"] = str(REPO / "reports" / "molecule")
    env["GPUCLUSTER_MOLECULE_IMAGE"] = _run_script(str(REPO / "scripts" / "molecule-image.sh"), env=env)
    yield env


@pytest.fixture(scope="session")
def site_image(molecule_env: dict[str, str]) -> str:
    """The site scenario's image: the shared one plus the Debian packages its roles install (site_image.py)."""
    return _run_script(str(REPO / "scripts" / "molecule-image.sh"), "--packages", ",".join(site_image_packages()),
                       env=molecule_env)


@pytest.fixture(scope="session")
def nct_dir(molecule_env: dict[str, str]) -> str:
    """The NVIDIA Container Toolkit binaries built from Go sources (the air-gapped local folder)."""
    return _run_script(str(REPO / "scripts" / "nvidia-container-toolkit-build.sh"), env=molecule_env)


@pytest.fixture(scope="session")
def k8s_bin_dir() -> Iterator[str]:
    """A folder with kubeadm, kubelet (and kubectl) from the toolchain cache (built on first use)."""
    from gpucluster import toolchain

    names = ["kubeadm", "kubelet", "kubectl"]
    paths = toolchain.ensure(names)
    with tempfile.TemporaryDirectory(prefix="gpucluster-k8s-bin-") as tmp:
        for name in names:
            os.symlink(paths[name], os.path.join(tmp, name))
        yield tmp


@pytest.fixture(scope="session")
def test_images() -> str:
    """A folder with the site scenario's image archives, and kubeadm's binaries built.

    The workload image (a static busybox) and the NetworkPolicy enforcer (kube-network-policies from
    the toolchain, laid out as upstream's image; molecule/site/tests/test_isolation.py runs it). The
    site scenario's kubernetes_node role writes kubeadm's images itself (`gpucluster images build` over
    the toolchain), so the toolchain must hold those binaries before it runs.
    """
    from gpucluster import airgap, toolchain, versions

    built = toolchain.ensure(["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "pause",
                              "kube-network-policies"], progress=False)
    busybox = Path("/bin/busybox")
    if not busybox.is_file():
        pytest.fail("the site scenario's workload image needs a static /bin/busybox: apt-get install -y busybox-static")
    version = airgap.binary_version(airgap.RECIPES["busybox"], busybox)
    out = _cache() / "test-images"
    airgap.build([f"localhost/gpucluster/busybox:{version}"], out, lambda _: busybox)
    airgap.build([f"localhost/gpucluster/kube-network-policies:{versions.KUBE_NETWORK_POLICIES}"], out,
                 lambda _: built["kube-network-policies"])
    return str(out)


@pytest.fixture(scope="session")
def gpu_standin_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What molecule/site/prepare.yml installs on the site's GPU stand-in hosts.

    NVIDIA's device plugin and the NVML stub library from the toolchain (built on first use), and per
    stand-in host (gpucluster.simulator.standin) the stub's GPUs, the plugin's environment and the
    config file the GPU Operator's config manager would hand it.
    """
    out = tmp_path_factory.mktemp("gpu-standin")
    gpu_standin.build(REPO / "molecule" / "site" / "inventory", out)
    return str(out)


@pytest.fixture(scope="session")
def scenario_runs(molecule_env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[dict[str, Future]]:
    """`molecule test` for every selected scenario, GPUCLUSTER_MOLECULE_JOBS (default 3) at a time.

    Scenarios share nothing on the host (own containers, own apt folders), and most of a scenario's
    time is spent waiting on podman and apt, so running them side by side roughly halves the wall time
    on a 2-core machine. Each scenario's full output goes to reports/molecule/<scenario>.log.
    """
    selected = [item.callspec.params["scenario"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_molecule_scenario"]
    # Scenarios whose failure-mode test runs next in this session: their hosts are left converged for it
    # (it destroys them), instead of being destroyed here and made again there.
    flipped = {item.callspec.params["scenario"] for item in request.session.items
               if getattr(item, "originalname", "") == "test_verify_fails_when_a_variable_is_flipped"}
    # Likewise the site's hosts for the day-2 tests on them (test_node_remove.py), the last of which destroys them.
    if any(getattr(item, "originalname", "") in SITE_DAY2_TESTS for item in request.session.items):
        flipped.add("site")
    # The site scenario is the longest: start it first so it does not finish last.
    order = sorted(dict.fromkeys(selected), key=lambda s: s != "site")
    envs = {s: scenario_env(s, molecule_env, request) for s in order}  # builds shared artifacts once, up front
    logs = REPO / "reports" / "molecule"
    logs.mkdir(parents=True, exist_ok=True)

    def run(scenario: str) -> tuple[subprocess.CompletedProcess, float]:
        start = time.monotonic()
        if left_created(scenario):  # an interrupted earlier run in this checkout left its hosts
            molecule(envs[scenario], scenario, "destroy")
        # --destroy never: a failed scenario's kubelet and containerd journals are kept before its hosts go.
        proc = molecule(envs[scenario], scenario, "test", "--destroy", "never", timeout=2400)
        if proc.returncode != 0:
            keep_journals(envs[scenario], scenario, logs)
        if proc.returncode != 0 or scenario not in flipped:
            molecule(envs[scenario], scenario, "destroy")
        seconds = time.monotonic() - start
        head = f"# molecule test -s {scenario}: rc {proc.returncode} in {seconds:.0f} s\n"
        (logs / f"{scenario}.log").write_text(head + proc.stdout + proc.stderr)
        return proc, seconds

    jobs = max(1, int(os.environ.get("GPUCLUSTER_MOLECULE_JOBS", "3")))
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="molecule") as pool:
        yield {s: pool.submit(run, s) for s in order}
