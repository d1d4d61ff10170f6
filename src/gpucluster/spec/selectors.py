"""The CEL selector of a spec DeviceClass: one function, read by the render core and by validation.

Every selector field set must hold (AND), over what the NVIDIA DRA driver publishes for driver
``gpu.nvidia.com``: string attributes ``type``, ``productName``, ``architecture``, ``profile``; semver
``cudaComputeCapability``; capacity ``memory`` (bytes). The removed ``index`` attribute is never used.
Validation evaluates the very expression the cluster gets (with :mod:`gpucluster.cel`) against the
devices the spec's pools will publish.
"""

from __future__ import annotations

from gpucluster import catalog
from gpucluster.cel import cel_list, cel_string
from gpucluster.spec.model import ClusterSpec, DeviceClass
from gpucluster.upstream import DRA_DRIVER

#: The type each DeviceClass of the DRA chart selects (tests/upstream/facts/dra-driver.yaml
#: deviceclass-gpu-selector, deviceclass-mig-selector, deviceclass-vfio-selector).
CHART_CLASS_TYPES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}


def device_class_cel(dc: DeviceClass) -> str:
    """The CEL expression of a DeviceClass: every selector field ANDed."""
    q = cel_string
    attr = f"device.attributes[{q(DRA_DRIVER)}]"
    s = dc.selector
    terms = [f"device.driver == {q(DRA_DRIVER)}", f"{attr}.type == {q(dc.type)}"]
    if s.min_memory:
        terms.append(f"device.capacity[{q(DRA_DRIVER)}].memory.compareTo(quantity({q(s.min_memory)})) >= 0")
    if s.product_name_contains:
        terms.append(f"{attr}.productName.lowerAscii().contains({q(s.product_name_contains.lower())})")
    if s.architecture:
        terms.append(f"{attr}.architecture == {q(s.architecture)}")
    if s.min_compute_capability:
        terms.append(f"{attr}.cudaComputeCapability.compareTo(semver({q(s.min_compute_capability + '.0')})) >= 0")
    if s.mig_profile:
        terms.append(f"{attr}.profile == {q(s.mig_profile)}")
    terms += [f"({extra})" for extra in s.cel]
    return " && ".join(terms)


def chart_class_cel(name: str) -> str:
    """The selector of one of the DRA chart's own classes (driver and type)."""
    return (f"device.driver == {cel_string(DRA_DRIVER)} && "
            f"device.attributes[{cel_string(DRA_DRIVER)}].type == {cel_string(CHART_CLASS_TYPES[name])}")


def extended_product_names(spec: ClusterSpec) -> list[str]:
    """Product names of the whole GPUs that serve plain ``nvidia.com/gpu`` (pools that opt in)."""
    return sorted({catalog.get(p.gpu.model).product_name for p in spec.gpu_pools
                   if p.gpu and p.uses_dra and p.extended_resource and p.gpu.model in catalog.catalog()})


def extended_class_cel(spec: ClusterSpec) -> str:
    """The extended-resource class's selector: whole GPUs of the opted-in pools (a DeviceClass sees device
    attributes, not nodes, so by product name), or nothing at all."""
    names = extended_product_names(spec)
    if not names:
        # Matches no device: plain nvidia.com/gpu pods never go to a DRA pool (the chart's class would).
        return f"device.driver == {cel_string(DRA_DRIVER)} && false"
    attr = f"device.attributes[{cel_string(DRA_DRIVER)}]"
    return (f"device.driver == {cel_string(DRA_DRIVER)} && {attr}.type == 'gpu' && "
            f"{attr}.productName in {cel_list(names)}")
