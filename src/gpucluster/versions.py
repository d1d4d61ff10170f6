"""Every pinned version in one place: Kubernetes, the NVIDIA driver, the toolchain, the charts.

Bump a version here and nowhere else; the spec's defaults, the render lock file, the toolchain and
the docs read it. Chart pins live in their component's row of :mod:`gpucluster.components` (one row
per component) and are readable here as :data:`CHARTS`.
"""

from __future__ import annotations

from gpucluster.components import Chart, with_charts

#: Kubernetes release of the spec's default, kubeadm's configuration and the local world.
KUBERNETES = "1.37.2"
# The driver the GPU Operator installs by default (and that simulated devices report). Hosts that
# manage their own driver on Debian 12 get the 535 series from non-free (see roles/nvidia_driver).
NVIDIA_DRIVER = "580.95.05"

#: The DCGM exporter the pinned GPU Operator chart deploys (its dcgmExporter.version, without the
#: image flavour). gpucluster does not pin it; what it can and cannot do decides what monitoring does.
DCGM_EXPORTER = "4.5.1-4.8.0"
#: The ResourceSlice API that exporter watches for DRA attribution (KUBERNETES_ENABLE_DRA).
DCGM_EXPORTER_DRA_API = "resource.k8s.io/v1beta1"

#: The Kubernetes provider the stacks ask the Pulumi engine for (built into the toolchain).
PULUMI_KUBERNETES_PROVIDER = "4.25.0"

# -- toolchain (built from Go modules, see gpucluster.toolchain.versions) ------------------------
ETCD = "v3.6.16"
#: The pause image kubeadm v1.37.2 names (cmd/kubeadm/app/constants PauseVersion) and the TAG of
#: build/pause/Makefile in the same module; the air-gapped host layer builds it from that pause.c.
PAUSE = "3.10.2"
KWOK = "v0.8.0"
CONTROLLER_TOOLS = "v0.20.0"
#: Upstream API modules whose CRDs controller-gen generates for the local world.
PROMETHEUS_OPERATOR_APIS = "v0.95.2"
#: Prometheus 3.16.0 is Go module version v0.316.0 (promtool and the local world's server come from it).
PROMETHEUS = "3.16.0"
#: The Prometheus Operator the local world's monitoring add-on runs (cmd/operator). Not the CRDs'
#: version above: the v0.95.2 main module is not served as a Go module here, v0.85.0 is.
PROMETHEUS_OPERATOR = "v0.85.0"
PULUMI = "v3.274.1"
#: Volcano binaries of the local world (the chart pin is in the component registry; see the README
#: for why the local world runs an older Volcano).
VOLCANO_LOCAL = "v1.14.1"
VOLCANO_APIS = "v1.14.0"
#: NVIDIA/k8s-device-plugin (device plugin + GPU Feature Discovery) whose code nvidia-oracle runs:
#: the release the pinned GPU Operator chart deploys (tests/upstream/facts/device-plugin.yaml,
#: operator-bundled-device-plugin-version). Served by the Go module proxy at this exact version.
K8S_DEVICE_PLUGIN = "v0.19.0"
#: kube-network-policies, the NetworkPolicy enforcer the flannel chart's netpol add-on runs, built for
#: the Molecule site scenario's isolation proof: the newest release the Go module proxy serves (the
#: chart's own image, v1.0.0, is not served as a module).
KUBE_NETWORK_POLICIES = "v1.1.1"
#: The deployers' API modules whose CRDs validate `render --deployer` bundles (tools/flux-crds,
#: tools/argocd-crds) and helmfile's own loader (tools/helmfile-check); see docs/gitops.md.
#: Flux v2.9.4's go.mod requires these three; the v2.10 API modules need Go 1.27.
FLUX_SOURCE_API = "v1.9.4"
FLUX_HELM_API = "v1.6.3"
FLUX_KUSTOMIZE_API = "v1.9.4"
#: Argo CD: the newest release whose API package resolves from served modules (tools/argocd-crds/go.mod).
ARGOCD = "v3.3.19"
HELMFILE = "v1.8.0"
#: containerd releases whose `config dump` the upstream tier runs over the host layer's drop-ins
#: (Debian 12's own 1.6 runs in Molecule): 1.7, the last 2.0 (before 2.1 merged plugin sections key by
#: key) and the newest 2.x served here.
CONTAINERD_17 = "v1.7.35"
CONTAINERD_20 = "v2.0.14"
CONTAINERD_2 = "v2.4.2"
#: Helm, for the tests only: `helm template` renders charts whose source a Go module we build carries
#: (Volcano's), so what their templates make of our values is Helm's answer (tools/helm).
HELM = "v3.22.0"

#: Pinned chart of every component that installs one, by component name.
CHARTS: dict[str, Chart] = {c.name: c.chart for c in with_charts() if c.chart is not None}

# Images the NicClusterPolicy deploys; the network operator release names them after itself
# (network-operator-v<chart version>), so they follow the chart's pin.
NETWORK_OPERATOR_IMAGES = {"repository": "nvcr.io/nvidia/mellanox",
                           "version": f"network-operator-v{CHARTS['network-operator'].version}"}
