"""The typed model of ``inventories/<env>/cluster.yaml``.

Field names are camelCase in YAML (as in Kubernetes) and snake_case in Python. Every section forbids
unknown keys so that a typo is an error, not a silently ignored setting. Defaults are what a careful
operator would choose; chart versions come from :mod:`gpucluster.versions`.

Cross-field rules (a pool naming an unknown host, a MIG layout that does not fit, quotas above
capacity, ...) live in :mod:`gpucluster.spec.validate`; this module checks one field at a time.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gpucluster import components, upstream, versions
from gpucluster.errors import Problem
from gpucluster.spec.names import (
    check_address,
    check_ansible_vars,
    check_count,
    check_endpoint,
    check_ifname,
    check_subject,
)
from gpucluster.spec.quantity import check_cpu, check_duration, check_memory

# Every pattern is used with fullmatch: `match` with `$` also accepts a trailing newline ("gpu\n"),
# which would then be rendered into object names and command lines.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                               re.DOTALL)
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")
TAINT = re.compile(r"(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>[A-Za-z]+)")


def _dns_label(value: str) -> str:
    if not DNS1123_LABEL.fullmatch(value):
        fixed = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63].rstrip("-")
        raise ValueError(
            f"{value!r} is not a valid DNS-1123 name: use at most 63 lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit{f'; hint: e.g. {fixed!r}' if fixed else ''}"
        )
    return value


def check_label_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if prefix and not DNS1123_SUBDOMAIN.fullmatch(prefix):
        raise ValueError(f"label key {key!r}: prefix {prefix!r} must be a DNS subdomain (lowercase, dots); "
                         "hint: e.g. gpucluster.dev/tier")
    if not LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"label key {key!r}: name part must be at most 63 characters of letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit; hint: e.g. gpucluster.dev/tier"
        )
    return key


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        check_label_key(key)
        if not LABEL_VALUE.fullmatch(str(val)):
            raise ValueError(f"label {key}: value {val!r} is not a valid label value; hint: a label value is at "
                             "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
Address = Annotated[str, AfterValidator(check_address)]
Endpoint = Annotated[str, AfterValidator(check_endpoint)]
InterfaceName = Annotated[str, AfterValidator(check_ifname)]
Subject = Annotated[str, AfterValidator(check_subject)]
Count = Annotated[int, AfterValidator(check_count)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Memory = Annotated[str, AfterValidator(check_memory)]
Cpu = Annotated[str, AfterValidator(check_cpu)]
Duration = Annotated[str, AfterValidator(check_duration)]


class Model(BaseModel):
    """Base: camelCase aliases, unknown keys rejected, values validated on assignment too."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_assignment=True
    )


class ChartRef(Model):
    """Where a Helm chart comes from. ``repository`` is a chart repository URL or a local path."""

    repository: str
    version: str = Field(description="The exact chart version as the repository spells it, never a range or latest: "
                         "the GPU Operator's releases carry a v "
                         f"({versions.CHARTS['gpu-operator'].version}), the DRA driver's do not "
                         f"({versions.CHARTS['dra-driver'].version}).")
    chart: str

    @field_validator("version")
    @classmethod
    def _exact(cls, v: str) -> str:
        if not re.fullmatch(r"v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?", v):
            raise ValueError(f"chart version {v!r} is not an exact version; pin one, e.g. 1.2.3")
        return v


def _chart(name: str) -> ChartRef:
    pin = components.get(name).chart
    assert pin is not None, name
    return ChartRef(repository=pin.repository, version=pin.version, chart=pin.name)


# --- hosts and pools --------------------------------------------------------------------------


class HostRole(str, Enum):
    control_plane = "control-plane"
    worker = "worker"


class Host(Model):
    name: Name
    address: Address = Field(
        description="IP address or DNS name (RFC 1123) Ansible connects to. Every host has its own (outside the "
        "local world) and none lies inside kubernetes.podSubnet or serviceSubnet.")
    roles: list[HostRole] = Field(default_factory=lambda: [HostRole.worker])
    os: Literal["debian12", "ubuntu22.04", "ubuntu24.04", "rhel9"] = Field(
        default="ubuntu24.04",
        description="The host's OS. NVIDIA builds GPU Operator driver images for Ubuntu and RHEL only: GPU hosts "
        "on debian12 need gpuOperator.driver.managedBy: host.",
    )
    ansible_vars: dict[str, object] = Field(
        default_factory=dict, description="Extra per-host Ansible variables (ansible_user, ...). ansible_host (an IP "
        "address or host name), ansible_port and ansible_user are checked: `verify --hosts ssh` connects with them "
        "too.",
    )

    topology: dict[Name, Name] = Field(
        default_factory=dict,
        description="Where the host sits in the fabric: one domain per tier of topology.tiers, e.g. "
        "{leaf: leaf-07, spine: spine-1}. Rendered as the node label gpucluster.dev/topology-<tier> and as "
        "Volcano HyperNode membership (docs/topology.md).")

    @field_validator("ansible_vars")
    @classmethod
    def _connection_vars(cls, v: dict[str, object]) -> dict[str, object]:
        return check_ansible_vars(v)


class SharingMode(str, Enum):
    exclusive = "exclusive"
    time_slicing = "time-slicing"
    mps = "mps"
    mig = "mig"
    #: DRA pools on GPUs that toggle MIG mode themselves (Hopper and newer): the DRA driver's DynamicMIG
    #: gate publishes the whole GPU and every MIG placement, and creates an instance when a claim is
    #: allocated one (partitionable devices: shared counters per GPU that the devices consume).
    dynamic_mig = "dynamic-mig"


class MigSharing(Model):
    layout: str | None = Field(
        default=None, description="Named layout: all-<profile>, all-balanced or all-disabled."
    )
    profiles: dict[str, int] | None = Field(
        default=None, description='Explicit layout per GPU, e.g. {"1g.10gb": 3, "2g.20gb": 2}.'
    )
    managed_by: Literal["operator", "host"] = Field(
        default="operator", description="Who applies the layout: the GPU Operator's MIG manager or Ansible."
    )


class Sharing(Model):
    mode: SharingMode = Field(
        default=SharingMode.exclusive,
        description="exclusive; time-slicing or mps (device plugin, with replicas); mig (a layout applied by the MIG "
        "manager); dynamic-mig (DRA pools on Hopper and newer: the DRA driver publishes the whole GPU and every MIG "
        "placement, and partitions per claim).",
    )
    replicas: int | None = Field(
        default=None, description="Time-slicing/MPS: how many workloads share one GPU (>= 2)."
    )
    rename_by_default: bool = Field(
        default=False, description="Advertise shared GPUs as nvidia.com/gpu.shared instead of nvidia.com/gpu."
    )
    fail_requests_greater_than_one: bool = Field(
        default=True, description="Reject pods asking for more than one shared GPU (they would not get more)."
    )
    mig: MigSharing | None = None


class Gpu(Model):
    model: str = Field(description="A GPU catalog key, e.g. H100-SXM5-80GB (see `gpucluster catalog`).")
    count: int = Field(ge=1, le=16, description="GPUs per host.")
    platform: str | None = Field(
        default=None,
        description="The server platform whose cited PCIe/NUMA layout the hosts have (`gpucluster catalog` lists "
        "them, e.g. dgx-h100). With it, the DRA driver's pciBusID and pcieRoot per GPU are known: verify compares "
        "them, validation checks claim templates with matchAttribute: pcieRoot, the local world publishes them. "
        "Without it none is assumed (another vendor's HGX board has other bus IDs).")


class Taint(Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        return check_label_key(v)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: object) -> object:
        return parse_taint(v)

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def parse_taint(value: object) -> object:
    """Accept ``key=value:Effect`` strings as well as mappings."""
    if isinstance(value, str):
        m = TAINT.fullmatch(value)
        if not m:
            raise ValueError(f"taint {value!r} is not a taint; hint: write it like key=value:NoSchedule (effects: "
                             "NoSchedule, PreferNoSchedule, NoExecute)")
        return {"key": m["key"], "value": m["value"] or "", "effect": m["effect"]}
    return value


class Rdma(Model):
    interfaces: list[InterfaceName] = Field(
        min_length=1, description="RDMA-capable netdevs, e.g. ibp12s0 or ens1f0np0 (Linux interface names: at most "
        "15 letters, digits, '_', '.' or '-').")
    link_type: Literal["infiniband", "ether"] = "infiniband"
    resource_name: str = Field(
        default="rdma_shared_device_a", description="Resource pods request as rdma/<resourceName>."
    )
    hugepages: int = Field(default=0, ge=0, description="2Mi hugepages to reserve on each host.")


CPUSET = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


def check_cpuset(value: str) -> str:
    """A Linux CPU list as the kubelet parses it (k8s.io/utils cpuset.Parse): ``0``, ``0-1``, ``0,56``."""
    value = str(value)
    if not CPUSET.fullmatch(value):
        raise ValueError(f"{value!r} is not a CPU list; hint: write CPU numbers and ranges like 0,56 or 0-1")
    for part in value.split(","):
        low, _, high = part.partition("-")
        if high and int(high) < int(low):
            raise ValueError(f"{value!r}: the range {part!r} runs backwards; hint: write it as {high}-{low}")
    return value


class ResourceManagers(Model):
    """The kubelet's Topology, CPU and Memory Manager policies for one pool's hosts.

    Written per host as a kubeadm patch of the KubeletConfiguration (target ``kubeletconfiguration``), which
    ``kubeadm init`` and ``kubeadm join`` apply to the node's /var/lib/kubelet/config.yaml only, so each pool
    keeps its own. Field names and values are the KubeletConfiguration's (kubelet.config.k8s.io/v1beta1).
    """

    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = Field(
        default="none", description="How the kubelet aligns a pod's GPUs (device plugin), CPUs and memory on NUMA "
        "nodes. restricted admits a pod only where its resources can take the fewest NUMA nodes that can hold "
        "them (an 8-GPU pod on a DGX H100 gets both sockets); single-numa-node admits only pods that fit on one "
        "NUMA node (no pod asking for more GPUs than one socket holds). DRA devices are not aligned: the "
        "kubelet's DRA manager gives the Topology Manager no hints; ask for GPUs under one pcieRoot instead.")
    topology_manager_scope: Literal["container", "pod"] = Field(
        default="container", description="pod aligns all of a pod's containers together (what a training pod "
        "with sidecars needs); container aligns each container on its own.")
    cpu_manager_policy: Literal["none", "static"] = Field(
        default="none", description="static gives containers of Guaranteed pods with whole CPUs exclusive cores "
        "(NUMA-aligned under a topology policy). Needs reservedSystemCPUs.")
    reserved_system_cpus: Annotated[str, AfterValidator(check_cpuset)] | None = Field(
        default=None, alias="reservedSystemCPUs", description="CPUs kept for the system and the kubelet, never "
        "handed to a pod, e.g. 0,56 (one core on each socket of a two-socket host). Required by cpuManagerPolicy "
        "static.")
    memory_manager_policy: Literal["None", "Static"] = Field(
        default="None", description="Static pins the memory (and hugepages) of Guaranteed pods to the NUMA nodes "
        "their CPUs and devices sit on. Needs reservedMemoryPerNumaNode.")
    reserved_memory_per_numa_node: Memory | None = Field(
        default=None, description="Memory kept for the system on each NUMA node with memoryManagerPolicy Static, "
        "e.g. 2Gi. gpucluster writes it as the kubelet's reservedMemory for every NUMA node of the pool's "
        "platform (one node without a platform) and sets systemReserved.memory so that their sum equals "
        "systemReserved plus the kubelet's default hard eviction threshold (memory.available 100Mi), which the "
        "kubelet requires.")


DEFAULT_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


class NodePool(Model):
    name: Name
    hosts: list[str] = Field(min_length=1)
    gpu: Gpu | None = Field(default=None, description="Absent for CPU-only pools.")
    sharing: Sharing = Field(default_factory=Sharing)
    dra: bool = Field(default=False, description="Serve this pool's GPUs with the DRA driver (ResourceSlices).")
    device_plugin: bool | None = Field(
        default=None,
        description="Serve this pool's GPUs with the NVIDIA device plugin; defaults to the opposite of `dra`. "
        "A pool must not be served by both.",
    )
    extended_resource: bool = Field(
        default=False,
        description="DRA pools: also serve pods that ask for plain `nvidia.com/gpu` (no claim) from this pool's whole "
        "GPUs, through the DeviceClass `dra-nvidia-gpu` (extendedResourceName nvidia.com/gpu). Pools without it "
        "never receive such pods.",
    )
    labels: Labels = Field(default_factory=dict)
    taints: list[Taint] | None = Field(
        default=None, description="Defaults to nvidia.com/gpu=present:NoSchedule on GPU pools, none on CPU pools."
    )
    rdma: Rdma | None = None
    resource_managers: ResourceManagers | None = Field(
        default=None, description="The kubelet's Topology, CPU and Memory Manager policies on this pool's hosts "
        "(the host layer writes them; absent: the kubelet's defaults, none).")

    @property
    def uses_device_plugin(self) -> bool:
        return bool(self.gpu) and (self.device_plugin if self.device_plugin is not None else not self.dra)

    @property
    def uses_dra(self) -> bool:
        return bool(self.gpu) and self.dra

    @property
    def shares_gpus(self) -> bool:
        """Whether the device plugin hands each GPU of this pool to several pods (time-slicing or MPS with
        replicas > 1, :func:`gpucluster.upstream.shares_gpus`)."""
        return self.uses_device_plugin and upstream.shares_gpus(self.sharing.mode.value, self.sharing.replicas)

    @property
    def effective_taints(self) -> list[Taint]:
        if self.taints is not None:
            return self.taints
        return [Taint.model_validate(DEFAULT_GPU_TAINT)] if self.gpu else []


# --- kubernetes -------------------------------------------------------------------------------


class Kubernetes(Model):
    version: str = Field(default=versions.KUBERNETES,
                         description="Kubernetes version, e.g. 1.37.2 (1.36 and 1.37 are supported).")
    pod_subnet: str = "10.244.0.0/16"
    service_subnet: str = "10.96.0.0/12"
    control_plane_endpoint: Endpoint | None = Field(
        default=None, description="host[:port] of the API (VIP or load balancer), e.g. 10.20.0.10:6443: no scheme, "
        "no path (kubeadm adds https:// itself). Required with more than one control-plane host.")
    control_plane_endpoint_provider: Literal["external", "keepalived-haproxy"] = Field(
        default="external", description="What answers at controlPlaneEndpoint. external: something gpucluster does "
        "not install (a hardware or cloud load balancer, a DNS name). keepalived-haproxy: the control-plane hosts "
        "hold the endpoint's address as a VRRP virtual IP (keepalived) and forward its port to every healthy API "
        "server (haproxy), both from the distribution's packages; the endpoint is then an unused IPv4 address in the "
        "control-plane hosts' subnet with a port other than the API server's 6443, e.g. 10.20.0.10:8443.")
    feature_gates: dict[str, bool] = Field(default_factory=dict)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.fullmatch(r"v?[0-9]+\.[0-9]+\.[0-9]+", v):
            raise ValueError(f"{v!r} is not a Kubernetes version like 1.37.2")
        return v.lstrip("v")

    @property
    def minor(self) -> tuple[int, int]:
        major, minor, _ = self.version.split(".")
        return int(major), int(minor)


# --- GPU Operator -----------------------------------------------------------------------------


class UpgradeDrain(Model):
    """``driver.upgradePolicy.drain`` of the GPU Operator chart: drain the whole node before the driver goes."""

    enable: bool = False
    force: bool = Field(default=False, description="Also delete pods no controller recreates.")
    pod_selector: str = Field(default="", description="Only pods matching this label selector.")
    timeout_seconds: int = Field(default=300, ge=0, description="Give up (node: upgrade-failed) after this long.")
    delete_empty_dir: bool = Field(default=False, description="Also evict pods with emptyDir volumes.")


class GpuPodDeletion(Model):
    """``driver.upgradePolicy.gpuPodDeletion``: evict the pods that use GPUs (when the drain is off)."""

    force: bool = False
    timeout_seconds: int = Field(default=300, ge=0)
    delete_empty_dir: bool = False


class WaitForCompletion(Model):
    """``driver.upgradePolicy.waitForCompletion``: let matching jobs finish before the upgrade."""

    timeout_seconds: int = Field(default=0, ge=0, description="0 waits for ever.")
    pod_selector: str = ""


class DriverUpgradePolicy(Model):
    """How the GPU Operator rolls a new driver version over the nodes (chart ``driver.upgradePolicy``).

    Defaults are the chart's (gpu-operator v26.3.0 values.yaml line 147). Evictions go through the
    Eviction API, so PodDisruptionBudgets hold; ``gpucluster verify`` follows each node's upgrade state.
    """

    auto_upgrade: bool = True
    max_parallel_upgrades: int = Field(default=1, ge=0, description="Nodes upgraded at once (0: no limit).")
    max_unavailable: int | str = Field(default="25%", description="GPU nodes that may be unavailable at once "
                                       "(a count or a percentage), the upgrading ones included.")
    wait_for_completion: WaitForCompletion = Field(default_factory=WaitForCompletion)
    gpu_pod_deletion: GpuPodDeletion = Field(default_factory=GpuPodDeletion)
    drain: UpgradeDrain = Field(default_factory=UpgradeDrain)

    @field_validator("max_unavailable")
    @classmethod
    def _max_unavailable(cls, v: int | str) -> int | str:
        if isinstance(v, int):
            if v < 1:
                # k8s-operator-libs starts no upgrade with 0 unavailable allowed (pkg/upgrade/common_manager.go:770
                # in gpu-operator v26.3.0's vendor folder; percentages round up), and the operator's chart
                # prints this value through `default "25%"` (v26.3.0 templates/clusterpolicy.yaml:237), which
                # turns an integer 0 into 25%
                raise ValueError("maxUnavailable must be >= 1 (0 would let no node upgrade, and the chart turns an "
                                 "integer 0 into its default 25%)")
            return v
        if not re.fullmatch(r"(100|[1-9]?[0-9])%", v):
            raise ValueError(f"{v!r} is neither a node count nor a percentage like 25%")
        if v == "0%":
            raise ValueError("maxUnavailable 0% would let no node upgrade: give a count >= 1 or a percentage > 0")
        return v


class Driver(Model):
    managed_by: Literal["operator", "host"] = Field(
        default="operator", description="operator: the GPU Operator's driver container; host: Ansible installs it."
    )
    version: str = Field(
        default=versions.NVIDIA_DRIVER,
        description="Pinned driver version. operator: the driver container's version; host: the package "
        "version (prefix) Ansible installs, e.g. \"535\" or \"535.247.01\" on Debian 12 (non-free carries "
        "the 535 series only).",
    )
    upgrade_policy: DriverUpgradePolicy = Field(
        default_factory=DriverUpgradePolicy,
        description="Rolling driver upgrades by the GPU Operator (managedBy: operator); host drivers are "
        "upgraded by playbooks/upgrade.yml.")


class DcgmExporter(Model):
    enabled: bool = True
    service_monitor: bool = True
    interval: Duration = "15s"
    dra_attribution: bool = Field(
        default=True,
        description="On DRA pools, name the pod and namespace of each ResourceClaim's GPU in its metrics: sets "
                    "the exporter's KUBERNETES_ENABLE_DRA, lets it read ResourceSlices, and has the API server serve "
                    "them at resource.k8s.io/v1beta1 (the version the pinned exporter watches). Off: DRA GPUs carry "
                    "no pod in their metrics, and cost and the pod alerts do not see them.",
    )


class GpuOperator(Model):
    enabled: bool = True
    namespace: Name = "gpu-operator"
    chart: ChartRef = Field(default_factory=lambda: _chart("gpu-operator"))
    driver: Driver = Field(default_factory=Driver)
    toolkit: bool = True
    cdi: bool = True
    nfd: bool = Field(default=True, description="Install Node Feature Discovery. Only one NFD per cluster.")
    mig_strategy: Literal["single", "mixed"] = Field(
        default="mixed", description="single: MIG devices as nvidia.com/gpu; mixed: nvidia.com/mig-<profile>."
    )
    dcgm_exporter: DcgmExporter = Field(default_factory=DcgmExporter)


# --- DRA --------------------------------------------------------------------------------------


class DeviceSelector(Model):
    """Attribute-based selection; every field set must hold (AND). Compiled to CEL."""

    min_memory: Memory | None = Field(
        default=None,
        description='Device memory at least, compared with what NVML reports: an "80GB" H100 reports '
        '81559 MiB (79.6Gi), so write "80G" to include it; "80Gi" would skip it.',
    )
    product_name_contains: str | None = Field(default=None, description='e.g. "H100".')
    architecture: str | None = Field(default=None, description='e.g. "Hopper".')
    min_compute_capability: str | None = Field(default=None, description='e.g. "9.0".')
    mig_profile: str | None = Field(default=None, description='MIG classes only, e.g. "1g.10gb".')
    cel: list[str] = Field(default_factory=list, description="Extra CEL expressions, ANDed.")

    @field_validator("min_compute_capability")
    @classmethod
    def _cc(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9]+\.[0-9]+", v):
            raise ValueError(f"{v!r} is not a compute capability like 9.0")
        return v


class DeviceClass(Model):
    name: Name
    type: Literal["gpu", "mig"] = "gpu"
    description: str = ""
    selector: DeviceSelector = Field(default_factory=DeviceSelector)


class ClaimAlternative(Model):
    """One choice of a prioritized claim: ``count`` devices of ``deviceClass``."""

    device_class: str
    count: int = Field(default=1, ge=1, le=64)


class ClaimTemplate(Model):
    name: Name
    device_class: str | None = Field(default=None, description="The DeviceClass to claim (or give firstAvailable).")
    count: int = Field(default=1, ge=1, le=64)
    first_available: list[ClaimAlternative] = Field(
        default_factory=list, max_length=8,
        description='Alternatives in order of preference, e.g. one H100, else two L40S: the scheduler takes the '
        "first that can be allocated (rendered as firstAvailable; the claim's status names the one taken). "
        "Replaces deviceClass and count.",
    )
    match_attribute: Literal["pcieRoot", "numaNode"] | None = Field(
        default=None,
        description="Allocate all of the claim's devices under one value of this topology attribute: "
        "pcieRoot puts them under one PCIe root complex (rendered as the constraint matchAttribute: "
        "resource.kubernetes.io/pcieRoot; the scheduler picks only devices that publish it, MIG devices "
        "carry their GPU's). Validation refuses a template no pool's cited platform layout can satisfy "
        "(on DGX H100 every GPU has its own root). numaNode is refused: the pinned DRA driver (0.4.1) does "
        "not publish resource.kubernetes.io/numaNode (0.5.0 does), so such a claim would never be allocated.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> ClaimTemplate:
        if (self.device_class is None) == (not self.first_available):
            raise ValueError("give either deviceClass (and count) or firstAvailable, not both and not neither")
        if self.first_available and "count" in self.model_fields_set:
            raise ValueError("count belongs to each firstAvailable alternative")
        return self

    @property
    def alternatives(self) -> list[ClaimAlternative]:
        """What the template may be allocated, in order: the one class, or the firstAvailable list."""
        if self.first_available:
            return list(self.first_available)
        assert self.device_class is not None
        return [ClaimAlternative(device_class=self.device_class, count=self.count)]


class Dra(Model):
    enabled: bool = True
    namespace: Name = "nvidia-dra-driver-gpu"
    chart: ChartRef = Field(default_factory=lambda: _chart("dra-driver"))
    driver_version: str = Field(
        default=versions.NVIDIA_DRIVER, description="Driver version the simulated devices report."
    )
    device_health_check: bool = Field(
        default=True,
        description="Run the driver's NVML health monitor (its NVMLDeviceHealthCheck gate): a GPU that "
        "reports a fatal XID is tainted gpu.nvidia.com/xid=<code>:NoSchedule in its ResourceSlice, an "
        "application XID with effect None. The driver cannot combine it with DynamicMIG: with a "
        "dynamic-mig pool it stays off.",
    )
    device_classes: list[DeviceClass] = Field(default_factory=list)
    claim_templates: list[ClaimTemplate] = Field(default_factory=list)


# --- scheduling -------------------------------------------------------------------------------


class PriorityClass(Model):
    name: Name
    value: int = Field(ge=-2147483648, le=1000000000)
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = ""


def _default_priorities() -> list[PriorityClass]:
    # Online inference preempts everything below it. Training may take idle capacity but never
    # preempts (a preempted gang job restarts from its last checkpoint, and training that can preempt
    # training evicts itself in a loop). Batch inference and notebooks preempt nothing either.
    return [
        PriorityClass(name="online-inference", value=100000, description="Latency-bound serving; preempts batch."),
        PriorityClass(name="training", value=50000, preemption_policy="Never",
                      description="Gang-scheduled training; never preempts, outranks batch in the queue."),
        PriorityClass(name="batch-inference", value=20000, preemption_policy="Never",
                      description="Throughput jobs; preemptible by online inference."),
        PriorityClass(name="notebooks", value=10000, preemption_policy="Never",
                      description="Interactive; lowest, preemptible."),
    ]


class Volcano(Model):
    enabled: bool = True
    namespace: Name = "volcano-system"
    chart: ChartRef = Field(default_factory=lambda: _chart("volcano"))
    preempt: bool = Field(default=True, description="Enable the preempt action (priority-based).")
    reclaim: bool = Field(default=True, description="Enable the reclaim action (queues take back their share).")


class Scheduling(Model):
    volcano: Volcano = Field(default_factory=Volcano)
    priority_classes: list[PriorityClass] = Field(default_factory=_default_priorities)


# --- topology ---------------------------------------------------------------------------------


class Gang(Model):
    """A gang shape the fabric must hold: ``gpus`` GPUs inside one domain of tier ``within``."""

    name: Name
    gpus: int = Field(ge=1, le=100000, description="Whole GPUs the gang asks for in all (pods x GPUs per pod).")
    within: Name = Field(description="The widest tier of topology.tiers the gang may span (e.g. leaf).")


class Topology(Model):
    """The physical fabric: tiers closest first, each host's domain per tier (hosts[].topology)."""

    tiers: list[Name] = Field(
        default_factory=list, max_length=8,
        description="Fabric tiers, closest first (e.g. [leaf, spine]): the first is Volcano's tier 1 (the "
        "smallest domain), each next one a wider domain holding whole domains of the one before.")
    gangs: list[Gang] = Field(
        default_factory=list,
        description="Gang shapes the cluster must be able to place inside one domain: validation refuses a "
        "spec where no domain of the tier holds that many GPUs, and doctor says where one fits now.")
    nvlink_tier: Name | None = Field(
        default=None,
        description="The tier of topology.tiers whose domains are multi-node NVLink domains (e.g. nvlink: one "
        "GB200 NVL72 rack). Required when a pool's gpu.platform is a multi-node NVLink system (gb200-nvl72): its "
        "hosts name their NVLink domain there, GFD labels each node's nvidia.com/gpu.clique, the DRA driver "
        "runs ComputeDomains, and verify checks that each domain's nodes share one clique (docs/topology.md).")


# --- networking -------------------------------------------------------------------------------


class IpRange(Model):
    """An inclusive range of addresses nv-ipam never hands out (its ``ExcludeRange``)."""

    # nv-ipam spells these startIP/endIP, not the camelCase our alias generator would give.
    start_ip: str = Field(alias="startIP", description="First excluded address (inside the network's cidr).")
    end_ip: str = Field(alias="endIP", description="Last excluded address (>= startIP, inside the cidr).")


class SecondaryNetwork(Model):
    """A Multus network on a host interface; its addresses come from an nv-ipam IPPool of the same name."""

    name: Name
    type: Literal["macvlan", "host-device", "ipoib"] = "macvlan"
    master: InterfaceName = Field(description="Parent interface on the host (a Linux interface name).")
    cidr: str
    namespaces: list[str] = Field(default_factory=list, description="Tenant namespaces that get it.")
    resource_name: str | None = Field(default=None, description="rdma/<name> resource tied to it.")
    per_node_block_size: int | None = Field(
        default=None, ge=1,
        description="Addresses nv-ipam reserves for each node (the most pods per node on this network). "
        "Defaults to the pods that can use it per node (networking.rdmaHcaMax with resourceName, else 110, "
        "the kubelet's default maxPods), lowered to what the cidr holds for every host that carries `master`.",
    )
    gateway: str | None = Field(default=None, description="Gateway address inside the cidr (none by default).")
    exclusions: list[IpRange] = Field(default_factory=list, description="Address ranges nv-ipam never allocates.")


class NetworkOperator(Model):
    enabled: bool = True
    namespace: Name = Field(
        default="nvidia-network-operator",
        description="Also where the secondary networks' IPPools live (nv-ipam watches the operator's namespace).",
    )
    chart: ChartRef = Field(default_factory=lambda: _chart("network-operator"))
    nfd: bool = Field(default=False, description="Must stay off when the GPU Operator installs NFD.")


class PodNetwork(Model):
    """The primary pod network (CNI). Multus needs one; nodes stay NotReady without it."""

    plugin: Literal["flannel", "none"] = Field(
        default="flannel",
        description="flannel: install the pinned flannel chart with podCidr = kubernetes.podSubnet; "
        "none: the cluster brings its own CNI.",
    )
    namespace: Name = "kube-flannel"
    chart: ChartRef = Field(default_factory=lambda: _chart("pod-network"))
    backend: Literal["vxlan", "host-gw", "wireguard", "udp"] = Field(
        default="vxlan", description="flannel backend (host-gw needs every node on one L2 segment)."
    )
    network_policy_enforcement: Literal["pod-network", "bring-your-own", "none"] = Field(
        default="pod-network",
        description="What enforces the tenants' NetworkPolicies. pod-network: the pod network installed here "
        "does (flannel with its kube-network-policies add-on, the chart's netpol.enabled); bring-your-own: "
        "the cluster's owner runs an enforcer gpucluster does not install (a policy-enforcing CNI with "
        "plugin: none, or a separate one), which verify cannot measure; none: nothing does (flannel without "
        "the add-on), allowed only without tenants. A NetworkPolicy nothing enforces isolates nobody: with "
        "tenants, plugin: none needs bring-your-own and none is refused.",
    )


class Networking(Model):
    pod_network: PodNetwork = Field(default_factory=PodNetwork)
    multus: bool = True
    network_operator: NetworkOperator = Field(default_factory=NetworkOperator)
    rdma_hca_max: int = Field(default=63, ge=1, le=1000, description="Pods sharing one HCA.")
    secondary_networks: list[SecondaryNetwork] = Field(default_factory=list)


# --- tenants ----------------------------------------------------------------------------------


class Quota(Model):
    gpus: int = Field(
        default=0, ge=0,
        description="requests.nvidia.com/gpu: whole or time-sliced GPUs of device-plugin pools (and GPUs the DRA "
        "chart's gpu.nvidia.com class serves under that name).",
    )
    cpu: Cpu | None = None
    memory: Memory | None = None
    pods: int | None = Field(default=None, ge=0)
    device_classes: dict[str, Count] = Field(
        default_factory=dict,
        description="DRA: the DeviceClasses this tenant may claim, with devices per class "
        "(<class>.deviceclass.resource.k8s.io/devices). Claims on any other class are refused at admission. "
        "Counts are 0 or more.",
    )
    extended: dict[str, Count] = Field(
        default_factory=dict,
        description="Other extended resources, e.g. nvidia.com/mig-1g.10gb: 7, nvidia.com/gpu.shared: 4, "
        "rdma/rdma_shared_device_a: 2. Every GPU or RDMA resource the cluster offers that is not named here is 0; "
        "counts are 0 or more.",
    )


class QueueSpec(Model):
    weight: int = Field(default=1, ge=1, le=1000)
    capability_gpus: int | None = Field(default=None, ge=0, description="Defaults to quota.gpus.")
    guarantee_gpus: int = Field(default=0, ge=0)
    reclaimable: bool = True


class ContainerDefaults(Model):
    cpu_request: Cpu = "100m"
    memory_request: Memory = "256Mi"
    cpu_limit: Cpu = "2"
    memory_limit: Memory = "4Gi"


class Tenant(Model):
    name: Name
    namespace: Name | None = Field(default=None, description="Defaults to the tenant name.")
    pod_security: Literal["restricted", "baseline", "privileged"] = "restricted"
    quota: Quota = Field(default_factory=Quota)
    queue: QueueSpec = Field(default_factory=QueueSpec)
    priority_classes: list[str] = Field(
        default_factory=lambda: ["training", "batch-inference", "notebooks"],
        description="PriorityClasses this tenant's pods and Volcano jobs may name (an admission policy refuses "
        "others); pods that name none run at priority 0.",
    )
    admins: list[Subject] = Field(default_factory=list, description="Groups bound to the tenant-admin Role (never "
                                  "system:* groups: Kubernetes reserves that prefix).")
    users: list[Subject] = Field(default_factory=list, description="Groups bound to the tenant-user Role (never "
                                 "system:* groups).")
    claim_templates: list[str] = Field(default_factory=list, description="dra.claimTemplates offered here.")
    container_defaults: ContainerDefaults = Field(default_factory=ContainerDefaults)
    egress_cidrs: list[str] = Field(
        default_factory=list,
        description="Networks this tenant's pods may reach besides their own namespace and cluster DNS "
        "(egress is denied otherwise), e.g. an object store's 10.20.0.0/16.",
    )

    @property
    def allowed_device_classes(self) -> list[str]:
        """The DeviceClasses this tenant may claim: those its quota names."""
        return sorted(self.quota.device_classes)

    @property
    def ns(self) -> str:
        return self.namespace or self.name


# --- monitoring and cost ----------------------------------------------------------------------


class Alerts(Model):
    low_utilization_percent: float = Field(default=10, gt=0, lt=100)
    low_utilization_for: Duration = "30m"
    framebuffer_percent: float = Field(default=90, gt=0, le=100)
    temperature_celsius: float = Field(default=85, gt=0, lt=130)
    idle_namespace_gpus: int = Field(default=1, ge=1, description="Allocated-but-idle GPUs per namespace.")


class Monitoring(Model):
    enabled: bool = True
    namespace: Name = "monitoring"
    prometheus_label: Labels = Field(
        default_factory=lambda: {"release": "prometheus"}, description="Label the Prometheus selects rules by."
    )
    alerts: Alerts = Field(default_factory=Alerts)


class Cost(Model):
    currency: str = "USD"
    rates: dict[str, float] = Field(default_factory=dict, description="Price per GPU-hour by catalog model.")


# --- the whole spec ---------------------------------------------------------------------------


#: The local world's environment: every host is simulated on this machine, so they share its address.
LOCAL_ENVIRONMENT = "local"


class Metadata(Model):
    name: Name
    environment: str = "production"


class ClusterSpec(Model):
    api_version: Literal["gpucluster.dev/v1alpha1"] = "gpucluster.dev/v1alpha1"
    kind: Literal["Cluster"] = "Cluster"
    metadata: Metadata
    hosts: list[Host] = Field(min_length=1)
    node_pools: list[NodePool] = Field(default_factory=list)
    kubernetes: Kubernetes = Field(default_factory=Kubernetes)
    gpu_operator: GpuOperator = Field(default_factory=GpuOperator)
    dra: Dra = Field(default_factory=Dra)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    topology: Topology = Field(default_factory=Topology)
    networking: Networking = Field(default_factory=Networking)
    tenants: list[Tenant] = Field(default_factory=list)
    monitoring: Monitoring = Field(default_factory=Monitoring)
    cost: Cost = Field(default_factory=Cost)
    #: What validation warned about when the spec was loaded; not a key of the YAML (never read or dumped).
    _warnings: list[Problem] = PrivateAttr(default_factory=list)

    @property
    def warnings(self) -> list[Problem]:
        """The warnings :func:`gpucluster.spec.load_spec` found (errors refuse the spec instead)."""
        return list(self._warnings)

    def record_warnings(self, problems: list[Problem]) -> None:
        """Keep validation's warnings with the spec they are about (the loader's job)."""
        self._warnings = [p for p in problems if p.severity == "warning"]

    # Convenience lookups used across the render core.
    @property
    def control_planes(self) -> list[Host]:
        """The control-plane hosts in the spec's order: the first is kubeadm init's."""
        return [h for h in self.hosts if HostRole.control_plane in h.roles]

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def pool_of(self, host: str) -> NodePool | None:
        return self.pools_by_host().get(host)

    def pools_by_host(self) -> dict[str, NodePool]:
        """Host name → its pool (first pool wins; validation rejects a host in two pools)."""
        out: dict[str, NodePool] = {}
        for pool in self.node_pools:
            for h in pool.hosts:
                out.setdefault(h, pool)
        return out

    @property
    def gpu_pools(self) -> list[NodePool]:
        return [p for p in self.node_pools if p.gpu is not None]

    @property
    def dcgm_dra_attribution(self) -> bool:
        """Whether the DCGM exporter attributes DRA-allocated GPUs to pods: asked for, and a DRA pool exists."""
        g = self.gpu_operator
        return (g.enabled and g.dcgm_exporter.enabled and g.dcgm_exporter.dra_attribution and self.dra.enabled
                and any(p.uses_dra for p in self.gpu_pools))
