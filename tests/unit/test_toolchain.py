"""Unit tests of the toolchain cache, resolution and CLI, with a stand-in `go` (no compiling)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from gpucluster import versions
from gpucluster.errors import GoMissing, ToolMissing
from gpucluster.toolchain import TOOLS, cache, core, gobuild
from gpucluster.toolchain.versions import DEFAULT_TOOLS, KUBERNETES

# A fake `go`: answers `go env GOVERSION`, and for `go build ... -o DIR/ PKG...` writes one script per
# package into DIR that prints a version line. Every call is appended to $FAKE_GO_LOG.
FAKE_GO = """#!/bin/sh
echo "$@" >> "$FAKE_GO_LOG"
if [ "$1" = env ]; then echo "${FAKE_GO_VERSION:-go1.26.8}"; exit 0; fi
if [ -n "$FAKE_GO_FAIL" ]; then echo "compile error: boom" >&2; exit 1; fi
echo "CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS $1" >> "$FAKE_GO_LOG.env"
if [ "$1" = run ]; then  # a generator: go run PKG -out DIR writes DIR/overlay.json
  while [ "$1" != -out ]; do shift; done
  mkdir -p "$2" && echo '{"Replace": {}}' > "$2/overlay.json"; exit 0
fi
out=""; pkgs=""; take=0; skip=0; shared=0
for a in "$@"; do
  if [ "$a" = -buildmode=c-shared ]; then shared=1; fi
  if [ $take = 1 ]; then out="$a"; take=0; continue; fi
  if [ $skip = 1 ]; then skip=0; continue; fi
  case "$a" in -o) take=1 ;; -overlay|-tags) skip=1 ;; -*|build) ;; *) pkgs="$pkgs $a" ;; esac
done
if [ $shared = 1 ]; then  # -o names the library; go writes its C header beside it
  printf 'ELF' > "$out"; echo '/* header */' > "${out%.*}.h"; exit 0
fi
for p in $pkgs; do
  case "$p" in *\\ *|*=*) continue ;; esac
  n=$(basename "$p"); case "$n" in v[2-9]*|v[1-9][0-9]*) n=$(basename "$(dirname "$p")") ;; esac
  b="$out/$n"; printf '#!/bin/sh\\necho fake\\n' > "$b"; chmod +x "$b"
done
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolated cache, a fake go on GPUCLUSTER_GO, and an empty PATH besides /bin for sh."""
    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_GO_LOG", str(tmp_path / "go.log"))
    monkeypatch.setenv("GPUCLUSTER_GO", str(_script(tmp_path / "go", FAKE_GO)))
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + "/bin:/usr/bin")
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(gobuild, "FALLBACK_GO", ())
    return tmp_path


def test_registry_is_consistent() -> None:
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert all(need in TOOLS for need in tool.needs), name
        if tool.kind == "go":
            assert tool.package, name
    assert {"kube-apiserver", "etcd", "kwok", "kubectl", "crds"} <= set(DEFAULT_TOOLS)
    flags = " ".join(TOOLS["kube-apiserver"].ldflags)
    # both version packages must be stamped or /version reports v0.0.0
    assert f"k8s.io/component-base/version.gitVersion={KUBERNETES}" in flags
    assert f"k8s.io/client-go/pkg/version.gitVersion={KUBERNETES}" in flags


def test_wrapper_modules_exist_for_every_tool() -> None:
    root = gobuild.wrappers_root()
    for tool in TOOLS.values():
        gomod = (root / tool.module / "go.mod").read_text()
        assert gomod.startswith("//"), f"{tool.module}/go.mod should say why it exists"
        assert (root / tool.module / "go.sum").is_file(), tool.module


def test_k8s_wrapper_replaces_every_staging_module_with_published_version() -> None:
    gomod = (gobuild.wrappers_root() / "k8s" / "go.mod").read_text()
    assert f"\tk8s.io/kubernetes {KUBERNETES} // indirect\n" in gomod  # tool deps are "indirect"
    staging = f"v0.{KUBERNETES.split('.', 1)[1]}"
    replaces = [line.split() for line in gomod.splitlines() if "=>" in line]
    assert len(replaces) >= 30
    assert all(r[0] == r[2] and r[3] == staging for r in replaces), replaces


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUCLUSTER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "gpucluster"
    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "explicit"))
    assert cache.cache_root() == tmp_path / "explicit"
    assert cache.version_dir(TOOLS["etcd"]) == tmp_path / "explicit/tools/etcd" / TOOLS["etcd"].version


def test_incomplete_version_dir_is_not_a_cached_tool(env: Path) -> None:
    tool = TOOLS["etcd"]
    vdir = cache.version_dir(tool)
    vdir.mkdir(parents=True)
    (vdir / "etcd").write_text("half-written")  # no marker: an interrupted build
    assert cache.cached_path(tool) is None
    with pytest.raises(ToolMissing, match="gpucluster tools install etcd"):
        core.path_of("etcd")


def test_ensure_builds_once_per_module_then_uses_the_cache(env: Path) -> None:
    names = ["kube-apiserver", "kube-scheduler", "etcd"]
    paths = core.ensure(names, progress=False)
    assert set(paths) == set(names)
    for name, path in paths.items():
        assert path == cache.version_dir(TOOLS[name]) / name
        assert path.is_file()
        assert cache.marker_info(TOOLS[name])["go"] == "go1.26.8"
    builds = [line for line in (env / "go.log").read_text().splitlines() if line.startswith("build")]
    assert len(builds) == 2  # one go build for both k8s binaries, one for etcd
    assert "-trimpath" in builds[0] and "gitVersion=" + KUBERNETES in builds[0]
    assert not list((cache.cache_root() / "tools").glob(".*")), "staging folders left behind"
    (env / "go.log").unlink()
    assert core.ensure(names, progress=False) == paths
    assert not (env / "go.log").exists() or "build" not in (env / "go.log").read_text()


def test_generator_runs_first_and_its_overlay_reaches_the_cgo_build(env: Path) -> None:
    tool = TOOLS["nvidia-oracle"]
    path = core.ensure(["nvidia-oracle"], progress=False)["nvidia-oracle"]
    assert path == cache.version_dir(tool) / "nvidia-oracle" and path.is_file()
    calls = [c for c in (env / "go.log").read_text().splitlines() if not c.startswith("env ")]
    run, build = calls[-2], calls[-1]
    assert run.startswith("run ./extract -out ") and run.endswith("/.generated")
    assert build.startswith("build -overlay ") and f"{run.split()[-1]}/overlay.json" in build
    assert "internal/info.version=" + tool.version.split("-src")[0] in build
    environments = (env / "go.log.env").read_text().splitlines()
    assert environments[-2:] == ["CGO_ENABLED=0 GOFLAGS=-mod=readonly -buildvcs=false run",
                                 "CGO_ENABLED=1 GOFLAGS=-mod=readonly -buildvcs=false build"]
    assert not list((cache.cache_root() / "tools").glob(".*")), "generated files left behind"


def test_cgo_build_without_a_c_compiler_is_one_clear_error(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(GoMissing, match=r"no C compiler \(no-such-cc\) found: nvidia-oracle is built with cgo"):
        core.ensure(["nvidia-oracle"], progress=False)
    assert not (env / "go.log.env").exists()  # nothing was built


def test_the_nvml_stub_is_a_shared_library_built_apart_and_the_device_plugin_with_the_module(env: Path) -> None:
    paths = core.ensure(["nvml-stub", "nvidia-device-plugin"], progress=False)
    stub, plugin = TOOLS["nvml-stub"], TOOLS["nvidia-device-plugin"]
    assert paths["nvml-stub"] == cache.version_dir(stub) / "libnvidia-ml.so.1" and paths["nvml-stub"].is_file()
    assert paths["nvidia-device-plugin"] == cache.version_dir(plugin) / "nvidia-device-plugin"
    assert not list(cache.version_dir(stub).glob("*.h"))  # the generated C header is not kept
    builds = [c for c in (env / "go.log").read_text().splitlines() if c.startswith("build")]
    shared = [b for b in builds if "-buildmode=c-shared" in b]
    assert len(builds) == 2 and len(shared) == 1  # one package per c-shared build
    assert shared[0].endswith("/libnvidia-ml.so.1 github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/nvmlstub")
    other = next(b for b in builds if b not in shared)
    assert other.endswith(" github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin")
    assert f"internal/info.version={versions.K8S_DEVICE_PLUGIN}" in other
    assert all(e.startswith("CGO_ENABLED=1 ") for e in (env / "go.log.env").read_text().splitlines())
    # Our stub's sources are in its version (as the oracle's), upstream's plugin is the pinned release.
    assert stub.version == TOOLS["nvidia-oracle"].version and plugin.version == versions.K8S_DEVICE_PLUGIN
    assert stub.optional and plugin.optional


def test_oracle_is_a_default_tool_pinned_once() -> None:
    tool = TOOLS["nvidia-oracle"]
    assert "nvidia-oracle" in DEFAULT_TOOLS  # the simulator needs it whenever the local world runs
    assert tool.version.startswith(versions.K8S_DEVICE_PLUGIN + "-src")
    module = gobuild.wrappers_root() / "nvidia-oracle"
    gomod = (module / "go.mod").read_text()
    assert f"\tgithub.com/NVIDIA/k8s-device-plugin {versions.K8S_DEVICE_PLUGIN}\n" in gomod
    # upstream code copied at build time never sits in the source tree
    assert not list(module.glob("zz_upstream_*.go"))
    assert "zz_upstream_*.go" in (module / ".gitignore").read_text()


def test_matching_binary_on_path_is_used_and_other_versions_are_not(env: Path) -> None:
    etcd = TOOLS["etcd"]
    _script(env / "bin" / "etcd", f"#!/bin/sh\necho 'etcd Version: {etcd.version.lstrip('v')}'\n")
    assert core.locate("etcd") == env / "bin" / "etcd"
    _script(env / "bin" / "etcd", "#!/bin/sh\necho 'etcd Version: 3.5.1'\n")
    assert core.locate("etcd") is None
    _script(env / "bin" / "etcd", f"#!/bin/sh\necho 'etcd Version: {etcd.version.lstrip('v')}1'\n")
    assert core.locate("etcd") is None  # 3.6.161 is not 3.6.16


def test_failed_build_leaves_nothing_and_names_the_log(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "1")
    with pytest.raises(gobuild.ToolError, match=r"(?s)building kwok failed .*boom"):
        core.ensure(["kwok"], progress=False)
    assert cache.cached_path(TOOLS["kwok"]) is None
    assert not (cache.cache_root() / "tools" / "kwok").exists() or not any(
        (cache.cache_root() / "tools" / "kwok").iterdir()
    )


@pytest.mark.parametrize(
    "go_version",
    [
        "go1.22.2",  # too old for the pinned modules
        "",  # `go env` printed nothing
    ],
)
def test_old_go_is_refused(env: Path, monkeypatch: pytest.MonkeyPatch, go_version: str) -> None:
    monkeypatch.setenv("FAKE_GO_VERSION", go_version or " ")
    with pytest.raises(GoMissing, match=r"Go ≥ 1\.24 is needed"):
        gobuild.find_go()


def test_cli_install_without_go_is_one_clear_error(env: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    monkeypatch.delenv("GPUCLUSTER_GO")
    result = cli("tools", "install", "etcd")
    assert result.exit_code == 2
    assert "Go ≥ 1.24 is needed to build the toolchain: apt-get install golang" in result.output
    assert "Traceback" not in result.output


def test_cli_install_unknown_name(env: Path, cli) -> None:
    result = cli("tools", "install", "kube-nothing")
    assert result.exit_code == 2
    assert "unknown tool(s) kube-nothing" in result.output


def test_cli_install_and_list(env: Path, cli) -> None:
    result = cli("tools", "install", "kwok")
    assert result.exit_code == 0, result.output
    assert "building kwok" in result.output and "built kwok" in result.output
    listing = cli("tools", "list")
    assert listing.exit_code == 0
    lines = {line.split()[0]: line for line in listing.output.splitlines()}
    assert str(cache.version_dir(TOOLS["kwok"]) / "kwok") in lines["kwok"]
    assert "missing" in lines["kube-apiserver"]
    assert "(optional)" in lines["kubelet"]


def test_k8smod_finds_staging_replaces_and_writes_wrapper() -> None:
    from gpucluster.toolchain import k8smod

    upstream = (
        "module k8s.io/kubernetes\n\ngo 1.26.0\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n"
        "\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n"
    )
    mods = k8smod.staging_modules(upstream)
    assert mods == ["k8s.io/api", "k8s.io/client-go"]
    text = k8smod.wrapper_gomod("v1.36.3", mods, "go 1.26.0")
    assert "\tk8s.io/api => k8s.io/api v0.36.3\n" in text
    assert "\tk8s.io/kubernetes/cmd/kube-apiserver\n" in text


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("k8s.io/kubernetes/cmd/kubectl", "kubectl"),
        ("go.etcd.io/etcd/server/v3", "server"),  # major-version suffix is skipped, like `go build`
        ("example.com/tool/v1", "v1"),  # v1 is not a major-version suffix
    ],
)
def test_default_binary_name(package: str, name: str) -> None:
    assert gobuild.default_binary_name(package) == name


def test_pause_is_compiled_from_the_pinned_module_apart_from_its_go_build(env: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """pause (kind "c") comes from build/pause/linux/pause.c of the k8s module `go mod download` names,
    compiled static with the release stamped in, and is not mixed into the k8s module's go build."""
    module = env / "modcache" / "k8s.io" / "kubernetes@v1.37.2"
    (module / "build/pause/linux").mkdir(parents=True)
    (module / "build/pause/linux/pause.c").write_text("int main(void) { return 0; }\n")
    go = (env / "go").read_text().replace(
        'if [ "$1" = env ];',
        f'if [ "$1" = mod ]; then echo \'{{"Path": "k8s.io/kubernetes", "Dir": "{module}"}}\'; exit 0; fi\n'
        'if [ "$1" = env ];')
    _script(env / "go", go)
    cc_log = env / "cc.log"
    # A stand-in C compiler and strip: record the call, write a binary that prints what pause -v prints.
    _script(env / "bin" / "fake-cc", f'#!/bin/sh\necho "$@" >> {cc_log}\nwhile [ "$1" != -o ]; do shift; done\n'
            f'printf \'#!/bin/sh\\necho "pause.c {TOOLS["pause"].version}"\\n\' > "$2"; chmod +x "$2"\n')
    _script(env / "bin" / "strip", f'#!/bin/sh\necho "strip $@" >> {cc_log}\n')
    monkeypatch.setenv("CC", "fake-cc")
    paths = core.ensure(["pause", "kube-scheduler"], progress=False)
    assert paths["pause"] == cache.version_dir(TOOLS["pause"]) / "pause"
    assert TOOLS["pause"].version == f"v{versions.PAUSE}-{KUBERNETES}"
    compile_call, strip_call = cc_log.read_text().splitlines()
    assert compile_call.split()[:4] == ["-Os", "-Wall", "-Werror", "-static"]
    assert f"-DVERSION={TOOLS['pause'].version}" in compile_call
    assert compile_call.endswith(f"{module}/build/pause/linux/pause.c")
    assert strip_call.startswith("strip ") and strip_call.endswith("/pause")
    builds = [line for line in (env / "go.log").read_text().splitlines() if line.startswith("build")]
    # the go build of the k8s module names only its Go package, not the C file
    assert len(builds) == 1 and builds[0].endswith(" k8s.io/kubernetes/cmd/kube-scheduler")
    assert core.locate("pause") == paths["pause"]


def test_pause_without_a_c_compiler_is_one_clear_error(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(GoMissing, match=r"no C compiler \(no-such-cc\) found: pause is Kubernetes' pause.c"):
        core.ensure(["pause"], progress=False)


# A fake controller-gen: logs its folder and arguments, writes one CRD into output:crd:dir.
FAKE_CONTROLLER_GEN = """#!/bin/sh
echo "$PWD $@" >> "$CG_LOG"
for a in "$@"; do
  case "$a" in output:crd:dir=*) echo "kind: CustomResourceDefinition" > "${a#output:crd:dir=}/x.yaml";; esac
done
"""


@pytest.mark.parametrize("name", [t.name for t in TOOLS.values() if t.kind == "crds"])
def test_each_crd_tool_runs_controller_gen_over_its_own_packages_in_its_own_module(
        env: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    tool = TOOLS[name]
    monkeypatch.setenv("CG_LOG", str(env / "cg.log"))
    out = env / "out"
    out.mkdir()
    gobuild.generate_crds(_script(env / "controller-gen", FAKE_CONTROLLER_GEN), tool, out, env / "build.log")
    folder, *args = (env / "cg.log").read_text().split()
    assert folder == str(gobuild.wrappers_root() / tool.module)
    assert args[0] == tool.crd_options and [a.removeprefix("paths=") for a in args[1:-1]] == list(tool.crd_packages)
    # every package comes from a module the wrapper requires (go.sum pins it)
    gomod = (gobuild.wrappers_root() / tool.module / "go.mod").read_text()
    required = re.findall(r"^(?:require )?\t?(\S+) v\S+", gomod, re.M)
    assert all(any(pkg.startswith(mod + "/") for mod in required) for pkg in tool.crd_packages), required
