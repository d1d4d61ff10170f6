"""The pinned toolchain: every tool gpucluster builds from Go modules, in one place.

Adding a tool takes one :data:`TOOLS` entry plus a wrapper module folder under the repository's
``tools/`` (a ``go.mod`` that requires the upstream module and a ``tool`` directive naming the
package; ``go mod tidy`` fills ``go.sum``). Tools that share a wrapper module (the Kubernetes
binaries) are built by one ``go build`` call, so they share one compile.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpucluster import versions

#: Kubernetes release of the control plane binaries; its staging modules are at v0.<minor>.<patch>.
KUBERNETES = f"v{versions.KUBERNETES}"
ETCD = versions.ETCD
KWOK = versions.KWOK
CONTROLLER_TOOLS = versions.CONTROLLER_TOOLS
#: Upstream API modules whose CRDs controller-gen generates (see tools/crds/go.mod).
PROMETHEUS_OPERATOR = versions.PROMETHEUS_OPERATOR_APIS
_major, _minor, _patch = versions.PROMETHEUS.split(".")
#: Prometheus x.y.z is published as Go module version v0.<x><yy>.<z>.
PROMTOOL = f"v0.{_major}{int(_minor):02d}.{_patch}"
#: The operator binary of the local world's monitoring add-on (gpucluster.addons.monitoring).
PROMETHEUS_OPERATOR_BINARY = versions.PROMETHEUS_OPERATOR
PULUMI = versions.PULUMI
PULUMI_KUBERNETES = f"v{versions.PULUMI_KUBERNETES_PROVIDER}"
VOLCANO = versions.VOLCANO_LOCAL
K8S_DEVICE_PLUGIN = versions.K8S_DEVICE_PLUGIN
PAUSE = versions.PAUSE
#: k8s.io/dynamic-resource-allocation is a staging module: v0.<minor>.<patch> of the Kubernetes pin.
DRA_LIBRARY = "v0." + KUBERNETES.split(".", 1)[1]

#: Oldest Go that builds every pinned module (their go.mod files say go 1.24 … 1.26).
MIN_GO = (1, 24)


def _k8s_ldflags(version: str) -> list[str]:
    """``-X`` flags that stamp the release into both version packages (as hack/lib/version.sh does)."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return flags


@dataclass(frozen=True)
class Tool:
    """One binary (or generated artifact directory) in the toolchain.

    ``module`` is the wrapper folder under ``tools/``; ``package`` the Go main package to build.
    ``version_args`` runs the binary to learn its version (for reusing one found on PATH);
    ``version_text`` is the substring that output must contain for an exact match.
    ``kind`` is ``"go"`` for a ``go build``, ``"crds"`` for controller-gen output (over
    ``crd_packages``, resolved in the wrapper module, with ``crd_options``), ``"c"`` for a static C
    program compiled from a file (``package``) of the wrapper module's main requirement, or
    ``"c-shared"`` for a shared library (``go build -buildmode=c-shared``) named ``output``.
    """

    name: str
    version: str
    module: str
    package: str = ""
    ldflags: tuple[str, ...] = ()
    version_args: tuple[str, ...] = ("--version",)
    version_text: str = ""
    kind: str = "go"
    needs: tuple[str, ...] = field(default_factory=tuple)
    optional: bool = False
    #: Go build tags (e.g. promtool's ``remove_all_sd`` leaves out the cloud service-discovery SDKs).
    tags: tuple[str, ...] = ()
    #: Build with cgo (needs a C compiler); everything else is built static with CGO_ENABLED=0.
    cgo: bool = False
    #: A main package inside the wrapper module run as ``go run <generate> -out DIR`` before the
    #: build; the ``DIR/overlay.json`` it writes is passed to ``go build -overlay`` (files added at
    #: build time that must never be committed, e.g. code copied from the module cache).
    generate: str = ""
    #: The file name in the cache when it is not the tool's name (a library's soname).
    output: str = ""
    #: For ``kind="crds"``: the Go API packages controller-gen reads, and its CRD generator options
    #: (descriptions dropped: validation is unchanged and the CRDs load quickly).
    crd_packages: tuple[str, ...] = ()
    crd_options: str = "crd:crdVersions=v1,maxDescLen=0"

    @property
    def binary(self) -> str:
        """File name in the cache (a directory name for generated artifacts)."""
        return self.output or self.name


def wrappers_root() -> Path:
    """The repository's ``tools/`` folder holding the wrapper modules (``$GPUCLUSTER_TOOLS_SRC``)."""
    explicit = os.environ.get("GPUCLUSTER_TOOLS_SRC")
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().parents[3] / "tools"


def _source_digest(module: str) -> str:
    """A short digest of a wrapper module's own files (Go sources, go.mod, go.sum).

    Tools built from our own code (not only from an upstream pin) put it in their version, so the
    cache never serves a binary built from older sources. ``src`` when the folder is absent (an
    installed package without the repository's ``tools/``: such a tool cannot be built there).
    """
    root = wrappers_root() / module
    files = sorted(p for p in root.rglob("*") if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum"))
                   and not p.name.startswith("zz_upstream_"))
    if not files:
        return "src"
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return "src" + digest.hexdigest()[:10]


def _k8s(name: str, *, optional: bool = False, version_args: tuple[str, ...] = ("--version",)) -> Tool:
    return Tool(
        name=name,
        version=KUBERNETES,
        module="k8s",
        package=f"k8s.io/kubernetes/cmd/{name}",
        ldflags=tuple(_k8s_ldflags(KUBERNETES)),
        version_args=version_args,
        version_text=f"{KUBERNETES}\n" if name == "kubectl" else f"Kubernetes {KUBERNETES}\n",
        optional=optional,
    )


#: Go API packages (inside tools/crds) that controller-gen turns into CRDs.
CRD_PACKAGES: tuple[str, ...] = (
    "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1",
)

_ALL: list[Tool] = [
    _k8s("kube-apiserver"),
    _k8s("kube-controller-manager"),
    _k8s("kube-scheduler"),
    _k8s("kubectl", version_args=("version", "--client")),
    # For the Ansible air-gapped path; they reuse the compile cache of the four above.
    _k8s("kubeadm", optional=True, version_args=("version", "-o", "short")),
    _k8s("kubelet", optional=True),
    # The pod sandbox image's binary for air-gapped hosts (gpucluster.airgap): Kubernetes' own
    # build/pause/linux/pause.c from the same k8s.io/kubernetes module, compiled static with the C
    # compiler as build/pause/Makefile does (-Os -Wall -Werror -static, then strip).
    Tool(
        name="pause",
        version=f"v{PAUSE}-{KUBERNETES}",
        module="k8s",
        package="k8s.io/kubernetes:build/pause/linux/pause.c",
        version_args=("-v",),
        version_text=f"pause.c v{PAUSE}-{KUBERNETES}\n",
        kind="c",
        optional=True,
    ),
    Tool(
        name="etcd",
        version=ETCD,
        module="etcd",
        package="go.etcd.io/etcd/server/v3",
        version_text=f"etcd Version: {ETCD.lstrip('v')}\n",
    ),
    # etcd snapshots (`gpucluster backup etcd` / `restore etcd`; on kubeadm clusters copied to the control-plane
    # hosts by playbooks/etcd-snapshot.yml and etcd-restore.yml): etcdctl saves one
    # from the running member, etcdutl restores it into a new data directory (etcd-io/etcd v3.6.16,
    # etcdctl/ctlv3/command/snapshot_command.go and etcdutl/etcdutl/snapshot_command.go).
    Tool(
        name="etcdctl",
        version=ETCD,
        module="etcd",
        package="go.etcd.io/etcd/etcdctl/v3",
        version_args=("version",),
        version_text=f"etcdctl version: {ETCD.lstrip('v')}\n",
    ),
    Tool(
        name="etcdutl",
        version=ETCD,
        module="etcd",
        package="go.etcd.io/etcd/etcdutl/v3",
        version_args=("version",),
        version_text=f"etcdutl version: {ETCD.lstrip('v')}\n",
    ),
    Tool(
        name="kwok",
        version=KWOK,
        module="kwok",
        package="sigs.k8s.io/kwok/cmd/kwok",
        ldflags=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK.lstrip('v')}",),
        version_text=f"{KWOK.lstrip('v')}",
    ),
    Tool(
        name="controller-gen",
        version=CONTROLLER_TOOLS,
        module="controller-gen",
        package="sigs.k8s.io/controller-tools/cmd/controller-gen",
        ldflags=(f"-X sigs.k8s.io/controller-tools/pkg/version.version={CONTROLLER_TOOLS}",),
        version_text=f"Version: {CONTROLLER_TOOLS}\n",
    ),
    Tool(
        name="crds",
        version=f"monitoring-{PROMETHEUS_OPERATOR}_cg-{CONTROLLER_TOOLS}",
        module="crds",
        kind="crds",
        needs=("controller-gen",),
        version_args=(),
        crd_packages=CRD_PACKAGES,
    ),
    # promtool checks and unit-tests the rendered PrometheusRule (Prometheus 3.16.0 = module v0.316.0).
    Tool(
        name="promtool",
        version=PROMTOOL,
        module="promtool",
        package="github.com/prometheus/prometheus/cmd/promtool",
        ldflags=(f"-X github.com/prometheus/common/version.Version={versions.PROMETHEUS}",),
        # Rule checking and rule tests need no cloud service discovery; leaving those SDKs out cut
        # the cold build from ~64 min to ~4 min under load here (88 MB -> 54 MB binary).
        tags=("remove_all_sd",),
        version_text=f"promtool, version {versions.PROMETHEUS} ",
    ),
    # The Prometheus server and the Prometheus Operator of the local world's monitoring add-on
    # (gpucluster.addons.monitoring). Optional: only tests/integration/test_alerts_live.py runs them
    # (scripts/test.sh installs them); `gpucluster up` does not. The server keeps the Kubernetes
    # service discovery only (remove_all_sd + enable_kubernetes_sd; file and http SD are always in).
    Tool(
        name="prometheus",
        version=PROMTOOL,
        module="prometheus",
        package="github.com/prometheus/prometheus/cmd/prometheus",
        ldflags=(f"-X github.com/prometheus/common/version.Version={versions.PROMETHEUS}",),
        tags=("remove_all_sd", "enable_kubernetes_sd"),
        version_text=f"prometheus, version {versions.PROMETHEUS} ",
        optional=True,
    ),
    Tool(
        name="prometheus-operator",
        version=PROMETHEUS_OPERATOR_BINARY,
        module="prometheus-operator",
        package="github.com/prometheus-operator/prometheus-operator/cmd/operator",
        ldflags=(f"-X github.com/prometheus/common/version.Version={PROMETHEUS_OPERATOR_BINARY.lstrip('v')}",),
        version_text=f"prometheus-operator, version {PROMETHEUS_OPERATOR_BINARY.lstrip('v')} ",
        optional=True,
    ),
    # The Pulumi engine for the stacks (issue 4). The CLI's wrapper requires pkg/v3 and sdk/v3 at
    # the same version; the Kubernetes provider is upstream tag v4.25.0 (a pseudo-version in
    # tools/pulumi-kubernetes/go.mod) served by a small main of ours. The provider prints no version.
    Tool(
        name="pulumi",
        version=PULUMI,
        module="pulumi",
        package="github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
        ldflags=(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI}",),
        version_args=("version",),
        version_text=f"{PULUMI}\n",
    ),
    Tool(
        name="pulumi-resource-kubernetes",
        version=PULUMI_KUBERNETES,
        module="pulumi-kubernetes",
        package="gpucluster.local/tools/pulumi-kubernetes/cmd/pulumi-resource-kubernetes",
        ldflags=(
            f"-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version={PULUMI_KUBERNETES.lstrip('v')}",
        ),
        version_args=(),
    ),
    # Volcano (issue 7): v1.14.1, not v1.15.1: no volcano.sh/apis that v1.15.1 compiles against is
    # served (see tools/volcano/go.mod); v1.14.1 builds against the published apis v1.14.0.
    # The three binaries come from one wrapper module, so they share one compile.
    Tool(
        name="vc-scheduler",
        version=VOLCANO,
        module="volcano",
        package="volcano.sh/volcano/cmd/scheduler",
        ldflags=(f"-X volcano.sh/volcano/pkg/version.Version={VOLCANO}",),
        version_text=f"Version: {VOLCANO}\n",
    ),
    Tool(
        name="vc-controller-manager",
        version=VOLCANO,
        module="volcano",
        package="volcano.sh/volcano/cmd/controller-manager",
        ldflags=(f"-X volcano.sh/volcano/pkg/version.Version={VOLCANO}",),
        version_text=f"Version: {VOLCANO}\n",
    ),
    # The admission webhook manager (the chart's vc-webhook-manager image), from the same module.
    Tool(
        name="vc-webhook-manager",
        version=VOLCANO,
        module="volcano",
        package="volcano.sh/volcano/cmd/webhook-manager",
        ldflags=(f"-X volcano.sh/volcano/pkg/version.Version={VOLCANO}",),
        version_text=f"Version: {VOLCANO}\n",
    ),
    # The NetworkPolicy enforcer of the flannel chart's netpol add-on, for the Molecule site scenario's
    # isolation proof (molecule/site/tests/test_isolation.py runs it from an image archive, as the chart
    # does). It prints no version: gpucluster.airgap reads the module version Go records in the binary.
    Tool(
        name="kube-network-policies",
        version=versions.KUBE_NETWORK_POLICIES,
        module="kube-network-policies",
        package="sigs.k8s.io/kube-network-policies/cmd/kube-network-policies/standard",
        version_args=(),
        optional=True,
    ),
    # NVIDIA's own GFD / device-plugin code (k8s-device-plugin, the release the GPU Operator deploys)
    # over a mock NVML: the GPU simulator asks it what the node agents would publish, so the local
    # world needs it. cgo: go-nvml's bindings (dlopen only; the mock never loads libnvidia-ml).
    # ./extract copies upstream's package-main start-up code in at build time (tools/README.md).
    # The version folder carries a digest of our sources so a changed oracle is rebuilt.
    Tool(
        name="nvidia-oracle",
        version=f"{K8S_DEVICE_PLUGIN}-{_source_digest('nvidia-oracle')}",
        module="nvidia-oracle",
        package="github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle",
        ldflags=(f"-X github.com/NVIDIA/k8s-device-plugin/internal/info.version={K8S_DEVICE_PLUGIN}",),
        version_args=(),
        cgo=True,
        generate="./extract",
    ),
    # The GPU stand-in of the Molecule site scenario (gpucluster.simulator.standin): NVIDIA's device
    # plugin binary from the same upstream module and release, and the NVML stub library it loads on a
    # host without a GPU (our tools/nvidia-oracle/nvmlstub, go-nvml's mock GPUs behind NVML's C ABI,
    # built -buildmode=c-shared as libnvidia-ml.so.1). Optional: only the Molecule tests run them.
    Tool(
        name="nvidia-device-plugin",
        version=K8S_DEVICE_PLUGIN,
        module="nvidia-oracle",
        package="github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin",
        ldflags=(f"-X github.com/NVIDIA/k8s-device-plugin/internal/info.version={K8S_DEVICE_PLUGIN}",),
        version_args=(),
        cgo=True,
        optional=True,
    ),
    Tool(
        name="nvml-stub",
        version=f"{K8S_DEVICE_PLUGIN}-{_source_digest('nvidia-oracle')}",
        module="nvidia-oracle",
        package="github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/nvmlstub",
        version_args=(),
        kind="c-shared",
        cgo=True,
        optional=True,
        output="libnvidia-ml.so.1",
    ),
    # The CEL oracle of the upstream tier (tests/upstream/test_cel_upstream.py): the DRA library's own
    # selector evaluation (k8s.io/dynamic-resource-allocation at the Kubernetes pin's staging version) and
    # resource.ParseQuantity, over JSON; our small main (tools/dra-cel). Optional: only that test runs it.
    Tool(
        name="dra-cel",
        version=f"{DRA_LIBRARY}-{_source_digest('dra-cel')}",
        module="dra-cel",
        package="gpucluster.local/tools/dra-cel",
        version_args=(),
        optional=True,
    ),
    # Volcano CRDs from the volcano.sh/apis v1.14.0 Go types (tools/volcano-crds), with the options
    # volcano's own `make manifests` uses. Optional: gpucluster.addons.volcano uses it when built and
    # otherwise generates the same itself.
    Tool(
        name="volcano-crds",
        version=f"apis-{versions.VOLCANO_APIS}_cg-{CONTROLLER_TOOLS}",
        module="volcano-crds",
        kind="crds",
        needs=("controller-gen",),
        version_args=(),
        optional=True,
        crd_packages=tuple(f"volcano.sh/apis/pkg/apis/{p}" for p in (
            "batch/v1alpha1", "bus/v1alpha1", "nodeinfo/v1alpha1", "scheduling/v1beta1", "topology/v1alpha1")),
        crd_options="crd:crdVersions=v1,generateEmbeddedObjectMeta=true,maxDescLen=0",
    ),
    # The deployers' CRDs for validating `render --deployer flux|argocd` bundles on the local world's
    # API server (tests/integration/test_deployers_live.py): Flux's HelmRepository, HelmRelease and
    # Kustomization (the API modules of Flux v2.9.4) and Argo CD's Application (argo-cd/v3 v3.3.19's
    # pkg/apis/application, as upstream's hack/gen-crd-spec runs controller-gen over it). Optional:
    # only those tests need them.
    Tool(
        name="flux-crds",
        version=(f"src-{versions.FLUX_SOURCE_API}_helm-{versions.FLUX_HELM_API}_kustomize-"
                 f"{versions.FLUX_KUSTOMIZE_API}_cg-{CONTROLLER_TOOLS}"),
        module="flux-crds",
        kind="crds",
        needs=("controller-gen",),
        version_args=(),
        optional=True,
        crd_packages=("github.com/fluxcd/source-controller/api/v1", "github.com/fluxcd/helm-controller/api/v2",
                      "github.com/fluxcd/kustomize-controller/api/v1"),
    ),
    Tool(
        name="argocd-crds",
        version=f"argo-cd-{versions.ARGOCD}_cg-{CONTROLLER_TOOLS}",
        module="argocd-crds",
        kind="crds",
        needs=("controller-gen",),
        version_args=(),
        optional=True,
        crd_packages=("github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1",),
    ),
    # containerd of the two majors the host layer supports beyond Debian 12's 1.6 (which Molecule runs
    # from Debian's package): 1.7, 2.0 (the last release before 2.1 changed how drop-ins merge plugin
    # sections) and the newest 2.x. Only `containerd --config FILE config dump` runs (no daemon): the
    # upstream tier merges the host layer's drop-ins with the NVIDIA Container Toolkit's through them
    # (tests/upstream/test_containerd_dropins_upstream.py). Optional: only that test needs them.
    *(Tool(
        name=name,
        version=version,
        module=module,
        package=f"{path}/cmd/containerd",
        ldflags=(f"-X {path}/version.Version={version}",),
        version_text=f" {version} ",
        optional=True,
        output="containerd",
    ) for name, version, module, path in (
        ("containerd-1.7", versions.CONTAINERD_17, "containerd17", "github.com/containerd/containerd"),
        ("containerd-2.0", versions.CONTAINERD_20, "containerd20", "github.com/containerd/containerd/v2"),
        ("containerd-2", versions.CONTAINERD_2, "containerd2", "github.com/containerd/containerd/v2"),
    )),
    # helmfile's own state loader over a rendered helmfile.yaml (tools/helmfile-check, our main over
    # github.com/helmfile/helmfile's pkg/state): strict parsing as `helmfile` does, then its release
    # plan (the `needs` graph). Optional: only tests/integration/test_deployers_live.py runs it.
    Tool(
        name="helmfile-check",
        version=f"{versions.HELMFILE}-{_source_digest('helmfile-check')}",
        module="helmfile-check",
        package="gpucluster.local/tools/helmfile-check",
        version_args=(),
        optional=True,
    ),
    # Helm's own CLI, unmodified (tools/helm): tests/upstream renders Volcano's chart from the module
    # the local world builds its daemons from (`helm template`) and compares each daemon's arguments,
    # the webhook configurations and the scheduler configuration with what gpucluster maps our values
    # to (gpucluster.render.volcano_chart). Optional: only the upstream tier runs it.
    Tool(
        name="helm",
        version=versions.HELM,
        module="helm",
        package="helm.sh/helm/v3/cmd/helm",
        ldflags=(f"-X helm.sh/helm/v3/internal/version.version={versions.HELM}",),
        version_args=("version", "--short"),
        version_text=versions.HELM,
        optional=True,
    ),
]

#: Every known tool by name, in build order.
TOOLS: dict[str, Tool] = {t.name: t for t in _ALL}

#: What ``ensure()`` builds when no names are given: everything not marked optional.
DEFAULT_TOOLS: tuple[str, ...] = tuple(t.name for t in _ALL if not t.optional)
