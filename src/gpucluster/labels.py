"""Every label and annotation key gpucluster reads or writes, in one place.

Our own keys use the ``gpucluster.dev/`` prefix (a unit test keeps any other prefix of ours out).
Upstream keys carry the upstream name and cite who sets them; their values are upstream facts too.
"""

from __future__ import annotations

OURS = "gpucluster.dev/"

# -- ours: objects and nodes ----------------------------------------------------------------------
#: Node label: the spec pool a host belongs to.
POOL = "gpucluster.dev/pool"
#: Node label ``"true"``: the DRA GPU kubelet plugin serves this node (its DaemonSet selects on it).
DRA = "gpucluster.dev/dra"
#: Namespace label: the tenant that owns the namespace.
TENANT = "gpucluster.dev/tenant"
#: ResourceQuota annotation: the GPUs the tenant's Volcano queue may hold.
QUEUE_CAPABILITY = "gpucluster.dev/queue-capability-gpus"
#: Tenant Namespace annotations the tenant admission policies read: the DeviceClasses and the
#: PriorityClasses the tenant may use, comma-separated (tenants cannot edit their Namespace).
ALLOWED_DEVICE_CLASSES = "gpucluster.dev/allowed-device-classes"
ALLOWED_PRIORITY_CLASSES = "gpucluster.dev/allowed-priority-classes"
#: Node label prefix: ``gpucluster.dev/topology-<tier>=<domain>``, the host's domain at each fabric tier of
#: the spec's ``topology.tiers`` (the tier-1 HyperNodes select nodes by it).
TOPOLOGY_PREFIX = "gpucluster.dev/topology-"
#: DeviceClass annotation: the spec's description of the class.
DESCRIPTION = "gpucluster.dev/description"
#: Annotation on the local world's structural stand-in CRDs (operators whose Go API is not served).
STAND_IN = "gpucluster.dev/stand-in"
#: DRA device taint key of a quarantined GPU (``gpucluster quarantine``), and the DeviceTaintRule label
#: ``"true"`` and annotations that say why and who: the taint's value is the reason cut to a label value.
QUARANTINE = "gpucluster.dev/quarantine"
QUARANTINE_REASON = "gpucluster.dev/quarantine-reason"

# -- ours: the GPU simulator (local world only) ---------------------------------------------------
#: Label and annotation ``"true"`` on every node and ResourceSlice the simulator owns.
SIMULATED = "gpucluster.dev/simulated"
#: Node annotation: a one-line summary of what the simulated agents derived (for debugging).
SIMULATOR_DERIVED = "gpucluster.dev/simulator-derived"
#: Fault annotations on simulated nodes (``kubectl annotate node NAME KEY=VALUE`` works too).
FAULT_UNHEALTHY_GPUS = "gpucluster.dev/simulate-unhealthy-gpus"  # GPU indices, "0,3"
FAULT_MISSING_DEVICES = "gpucluster.dev/simulate-missing-devices"  # DRA device names, "gpu-2,gpu-5"
FAULT_PRODUCT = "gpucluster.dev/simulate-product"  # the value GFD's product label shows
FAULT_NOT_READY = "gpucluster.dev/simulate-not-ready"  # "true": kwok keeps the node NotReady
#: MIG manager faults (value "true"): the change never gets past ``pending`` with the operands paused
#: (gpu-operator issue 2833), the apply fails (``failed``, operands left paused), or the mode change
#: needs a reboot (``rebooting`` for one sync, as with the manager's WITH_REBOOT).
FAULT_MIG_WEDGE = "gpucluster.dev/simulate-mig-wedge"
FAULT_MIG_FAIL = "gpucluster.dev/simulate-mig-fail"
FAULT_MIG_REBOOT = "gpucluster.dev/simulate-mig-reboot"
#: Node annotation: the MIG state of the simulated GPUs (JSON; the silicon's memory between syncs).
SIMULATED_MIG = "gpucluster.dev/simulated-mig"
#: Node annotation: what the simulated DRA kubelet plugin read when its pod started (JSON: the MIG layout
#: and its pod template); absent while no plugin runs on the node.
SIMULATED_DRA_PLUGIN = "gpucluster.dev/simulated-dra-plugin"
#: Node annotation read by the simulated DCGM exporter: JSON knobs per GPU ("0") or MIG instance
#: ("0/3" = GPU 0, GPU instance 3), e.g. {"0": {"xid": 79, "gr_engine_active": 0.02}}.
SIMULATE_DCGM = "gpucluster.dev/simulate-dcgm"

# -- Kubernetes -----------------------------------------------------------------------------------
MANAGED_BY = "app.kubernetes.io/managed-by"
HOSTNAME = "kubernetes.io/hostname"
OS = "kubernetes.io/os"
ARCH = "kubernetes.io/arch"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"  # kubeadm
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # set by the API server on every namespace
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
POD_SECURITY_ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
POD_SECURITY_AUDIT = "pod-security.kubernetes.io/audit"
POD_SECURITY_WARN = "pod-security.kubernetes.io/warn"
#: kwok manages nodes carrying this annotation (value ``fake``).
KWOK_NODE = "kwok.x-k8s.io/node"

# -- NVIDIA: set by users/us, read by the GPU Operator's operands -----------------------------------
#: Which key of the device-plugin ConfigMap the device plugin and GFD on a node use.
DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
#: Which mig-parted config the MIG manager applies on a node.
MIG_CONFIG = "nvidia.com/mig.config"
#: The MIG manager's progress with that config: pending, rebooting, success, failed.
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
#: The GPU Operator deploys an operand on a node while ``nvidia.com/gpu.deploy.<operand>`` is true.
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
DEPLOY_MIG_MANAGER = "nvidia.com/gpu.deploy.mig-manager"
DEPLOY_GFD = "nvidia.com/gpu.deploy.gpu-feature-discovery"
DEPLOY_DCGM_EXPORTER = "nvidia.com/gpu.deploy.dcgm-exporter"
#: The value the MIG manager gives the deploy labels of GPU clients while it reconfigures
#: (mig-parted ``pkg/mig/reconfigure/reconfigure.go:563``); ``"true"`` again when it is done.
DEPLOY_PAUSED = "paused-for-mig-change"
#: Node label ``"true"`` set by NFD on nodes with an NVIDIA PCI device (the GPU Operator reads it).
NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"

# -- NVIDIA: published by GPU Feature Discovery ----------------------------------------------------
GPU_PRESENT = "nvidia.com/gpu.present"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_PRODUCT = "nvidia.com/gpu.product"
#: GFD's NVLink clique of a node whose GPUs NVML reports registered in a multi-node NVLink fabric:
#: ``<clusterUUID>.<cliqueID>`` (k8s-device-plugin v0.19.0 internal/lm/imex.go:29-83); absent elsewhere.
GPU_CLIQUE = "nvidia.com/gpu.clique"
GPU_MEMORY = "nvidia.com/gpu.memory"
GPU_FAMILY = "nvidia.com/gpu.family"
GPU_REPLICAS = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
GPU_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
GPU_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_STRATEGY = "nvidia.com/mig.strategy"


def mig_count(profile: str) -> str:
    """GFD's per-profile instance count label under the mixed strategy."""
    return f"nvidia.com/mig-{profile}.count"


def mig_memory(profile: str) -> str:
    """GFD's per-profile memory label (MiB) under the mixed strategy."""
    return f"nvidia.com/mig-{profile}.memory"


def is_gfd_label(key: str) -> bool:
    """Labels GPU Feature Discovery and the MIG manager own (not the ones users, kubelet or we set)."""
    if key in (MIG_CONFIG, DEVICE_PLUGIN_CONFIG) or key.startswith(DEPLOY_PREFIX):
        return False
    return key.startswith(("nvidia.com/gpu.", "nvidia.com/mig.", "nvidia.com/mig-", "nvidia.com/cuda."))


# -- NVIDIA network operator: node labels its DaemonSets select on -----------------------------------
#: ``"true"`` on nodes with an NVIDIA/Mellanox NIC (PCI vendor 15b3, class 0200/0207): set by NFD from the
#: NodeFeatureRule the network-operator chart installs (netop ``pkg/nodeinfo/attributes.go:32``).
MELLANOX_NIC = "feature.node.kubernetes.io/pci-15b3.present"
#: ``"false"`` once no OFED driver pod is pending on the node; the operator sets it on Mellanox nodes
#: while it reconciles a NicClusterPolicy without ``ofedDriver`` (netop ``pkg/nodeinfo/attributes.go:34``).
MOFED_WAIT = "network.nvidia.com/operator.mofed.wait"
#: Node labels published by NFD and the network operator (the GPU simulator stands in for both).
NIC_AGENT_LABELS = (MELLANOX_NIC, MOFED_WAIT)
#: Node labels NFD and the GPU Operator put on GPU nodes (the GPU simulator stands in for both).
GPU_OPERATOR_LABELS = (NFD_NVIDIA_PCI,)


def is_agent_label(key: str) -> bool:
    """Labels NVIDIA's node agents, NFD's NIC rule or the network operator own (never set by us or users)."""
    return is_gfd_label(key) or key in NIC_AGENT_LABELS or key in GPU_OPERATOR_LABELS

# -- Volcano ------------------------------------------------------------------------------------
#: Pod and Namespace annotation: the Volcano queue a pod's PodGroup goes to (volcano-sh/apis v1.14.0
#: pkg/apis/scheduling/v1beta1/labels.go:48); on a Namespace, Volcano's PodGroup webhook uses it for
#: PodGroups that name the default queue.
VOLCANO_QUEUE_NAME = "scheduling.volcano.sh/queue-name"
#: Pod annotation: the PodGroup a pod belongs to (labels.go:32); vc-controller sets it on a Job's pods.
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"

# -- DRA ------------------------------------------------------------------------------------------
#: Namespace label ``"true"`` that lets claims there ask for admin access to devices (k8s.io/api
#: v0.36.3 resource/v1/types.go:967). gpucluster never sets it on a tenant namespace.
DRA_ADMIN_ACCESS = "resource.kubernetes.io/admin-access"

# -- Multus ---------------------------------------------------------------------------------------
#: NetworkAttachmentDefinition annotation: the device-plugin resource pods of this network request.
NAD_RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName"

# -- Deployers (render --deployer) ----------------------------------------------------------------
#: Argo CD annotation: the sync wave of an object; lower waves are applied (and must be healthy)
#: first (github.com/argoproj/argo-cd/v3@v3.3.19/docs/user-guide/sync-waves.md).
ARGOCD_SYNC_WAVE = "argocd.argoproj.io/sync-wave"
