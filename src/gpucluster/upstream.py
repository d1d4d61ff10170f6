"""Names NVIDIA's components (and Volcano) define, and the names of ours that meet them: one place for both.

The render core writes these names into objects (DeviceClass selectors, quotas, chart values), spec
validation checks a spec against them, and verification's arithmetic (:mod:`gpucluster.devices`) and
checks read them back. They are names, not arithmetic: a module that imports them computes nothing
from them. Each value says where upstream defines it (the fact ids are in
``tests/upstream/facts/dra-driver.yaml`` and ``device-plugin.yaml``; ``tests/upstream/`` compares them).

The GPU simulator keeps its own copies on purpose (it publishes what upstream does from upstream's
facts), so a wrong name here shows up as a disagreement instead of agreeing by accident.
"""

from __future__ import annotations

import re

# -- the NVIDIA device plugin ---------------------------------------------------------------------

#: Sharing modes in which several workloads share one GPU (the device plugin's ``sharing.timeSlicing``
#: and ``sharing.mps`` with ``replicas``).
SHARED_MODES = ("time-slicing", "mps")


def shares_gpus(mode: str, replicas: int | None) -> bool:
    """Whether the device plugin hands one GPU to several workloads: a sharing mode with replicas > 1."""
    return mode in SHARED_MODES and (replicas or 0) > 1


def mig_resource(profile: str) -> str:
    """The device plugin's resource for a MIG profile under the mixed strategy.

    A ``+`` in a profile (``1g.10gb+me``) is not allowed in a resource name; the plugin writes it as
    ``.`` (``nvidia.com/mig-1g.10gb.me``; tests/upstream/facts/device-plugin.yaml resource-mig-mixed).
    """
    return "nvidia.com/mig-" + profile.replace("+", ".")


#: XIDs of application errors, after which the GPU is still healthy: the device plugin ignores them in its
#: health check (k8s-device-plugin v0.19.0 internal/rm/health.go:233, fact health-application-xids).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

# -- the GPU Operator ----------------------------------------------------------------------------------

#: The operator's validator: one pod per GPU node whose init containers validate, in order, the driver,
#: the container toolkit, CUDA and the device plugin; its main container starts once all passed, so a
#: Ready pod is a validated node (gpu-operator v26.3.0 assets/state-operator-validation/0500_daemonset.yaml,
#: fact validator-daemonset).
OPERATOR_VALIDATOR_LABELS = {"app": "nvidia-operator-validator"}
OPERATOR_VALIDATIONS = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
#: The operator's DCGM exporter pods and the port they serve ``/metrics`` on (gpu-operator v26.3.0
#: assets/state-dcgm-exporter/0800_daemonset.yaml, fact dcgm-exporter-daemonset).
DCGM_EXPORTER_POD_LABELS = {"app": "nvidia-dcgm-exporter"}
DCGM_EXPORTER_POD_PORT = 9400

# -- the NVIDIA DRA driver (dra-driver-nvidia-gpu) ----------------------------------------------------

#: The DRA driver's name: ResourceSlices, DeviceClass selectors and attribute domains use it.
DRA_DRIVER = "gpu.nvidia.com"
#: DeviceClasses the DRA driver's chart creates itself when it serves GPUs (dra-driver 0.4.1,
#: tests/upstream/facts/dra-driver.yaml chart-deviceclasses-gpus); ``gpu.nvidia.com`` also names
#: ``nvidia.com/gpu`` as its extended resource (deviceclass-gpu-extended-resource-name).
DRA_CHART_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
#: The DeviceClass of a ComputeDomain's IMEX channel, which the chart creates with computeDomains on: the
#: controller's ResourceClaimTemplate in the workload's namespace claims it (fact
#: compute-domain-channel-class). Tenants who run ComputeDomains claim it; the daemon class
#: compute-domain-daemon.nvidia.com is the driver's own, in its namespace.
DRA_COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
#: The ComputeDomain API a workload creates, (group, plural, version) (fact compute-domain-api).
COMPUTE_DOMAIN_API = ("resource.nvidia.com", "computedomains", "v1beta1")
#: The ``brand`` attribute of NVIDIA datacenter GPUs (go-nvlib's string for NVML BRAND_NVIDIA; fact
#: brand-value-nvidia).
DRA_BRAND = "Nvidia"
#: Our DeviceClass that serves plain ``nvidia.com/gpu`` requests from the whole GPUs of the pools that opt
#: in (``nodePools[].extendedResource``). The scheduler maps an extended resource to the NEWEST DeviceClass
#: naming it, ties broken by the lower name (k8s.io/dynamic-resource-allocation v0.37.2
#: deviceclass/extendedresourcecache, fact extended-resource-class-newest-wins): the name sorts before the
#: chart's ``gpu.nvidia.com`` and the class is created after the chart, so it takes that mapping over.
DRA_EXTENDED_CLASS = "dra-nvidia-gpu"
#: The extended resource it serves.
DRA_EXTENDED_RESOURCE = "nvidia.com/gpu"
#: The DRA driver's feature gate for partitionable MIG (fact driver-feature-gates: alpha, default off).
DYNAMIC_MIG_GATE = "DynamicMIG"
#: The DRA driver's feature gate under which it taints unhealthy devices in its ResourceSlices, keys under
#: ``gpu.nvidia.com/`` (alpha, default off; excluded by DynamicMIG; facts driver-feature-gates,
#: device-taints-on-health-events). With it off an unhealthy GPU stays published untainted.
DRA_HEALTH_GATE = "NVMLDeviceHealthCheck"
DRA_HEALTH_TAINT_PREFIX = "gpu.nvidia.com/"
#: Architectures whose GPUs switch MIG mode without a GPU reset: with DynamicMIG the driver publishes the
#: whole GPU next to its partitions (dra-driver-nvidia-gpu v0.4.1 nvlib.go:1461 supportsMIGModeToggle:
#: Hopper and newer; fact dynamic-mig-publishes).
MIG_TOGGLE_ARCHITECTURES = ("Hopper", "Blackwell")
#: Topology attributes a claim template may constrain its devices on (``dra.claimTemplates[].matchAttribute``),
#: by the spec's short name: the qualified name the pinned driver publishes on every GPU whose root sysfs
#: resolves, and on its MIG devices (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/deviceinfo.go:183,
#: mig.go:180; facts gpu-attributes, mig-attributes, pcieRoot-format).
DRA_TOPOLOGY_ATTRIBUTES = {"pcieRoot": "resource.kubernetes.io/pcieRoot"}
#: Topology attributes the pinned driver does NOT publish, with the first driver version that does: a
#: constraint on an attribute no device has never allocates (k8s.io/dynamic-resource-allocation v0.37.2
#: structured/internal/stable/allocator_stable.go:695-700, fact match-attribute-missing-unsatisfiable).
DRA_UNPUBLISHED_ATTRIBUTES = {"numaNode": ("resource.kubernetes.io/numaNode", "0.5.0")}
#: A static-MIG device name of the DRA driver: gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>
#: (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/mig.go:113, fact mig-device-name-regex).
MIG_DEVICE_NAME = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$")


def mig_name_part(profile: str) -> str:
    """The profile as it appears in a MIG device name: dots dropped, then RFC 1123 (1g.10gb+me -> 1g10gb-me)."""
    return re.sub(r"[^a-z0-9.-]", "-", profile.replace(".", "").lower())


def counter_set_name(gpu: int) -> str:
    """The shared counter set of one GPU under DynamicMIG (fact dynamic-mig-counter-set-name)."""
    return f"gpu-{gpu}-counter-set"


# -- Volcano ---------------------------------------------------------------------------------------------

#: What a Queue's spec holds where it leaves these out: the API server's CRD schema defaults (the Queue
#: type's kubebuilder markers; volcano v1.15.1 staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/
#: types.go:461,503, fact queue-spec-crd-defaults) and the parent Volcano's queue controller sets on every
#: queue but ``root`` (pkg/controllers/queue/queue_controller_action.go:296, fact
#: queue-controller-sets-parent-root; a queue it has not reached yet is root's child all the same).
VOLCANO_QUEUE_DEFAULTS = {"weight": 1, "dequeueStrategy": "traverse", "parent": "root"}
