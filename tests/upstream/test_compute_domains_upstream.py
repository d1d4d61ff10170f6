"""Multi-node NVLink against the DRA driver's ComputeDomain facts (dra-driver-nvidia-gpu 0.4.1).

What we enforce and render for a gb200-nvl72 pool must be what the driver asks: the driver version its
compute-domain plugin starts on, the IMEX domain size its controller allows, the host IMEX service off in
the order its prerequisites give, and the clique string GPU Feature Discovery labels is the same string
the driver's plugin computes for the same fabric (both ``<clusterUUID>.<cliqueID>``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from upstream_facts import fact, source

from gpucluster.render import dra_driver
from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import NodeRequest
from gpucluster.simulator.silicon import silicon_of
from gpucluster.spec import load_spec
from gpucluster.spec.nvlink import MAX_NODES_PER_IMEX_DOMAIN, MIN_COMPUTE_DOMAIN_DRIVER

REPO = Path(__file__).resolve().parents[2]
SPEC = load_spec(REPO / "tests" / "data" / "nvlink")
DRIVER = "580.95.05"


def test_the_driver_minimum_and_the_imex_domain_size_are_the_drivers() -> None:
    want = tuple(int(p) for p in fact("dra-driver", "compute-domain-min-driver").split("."))
    assert want == MIN_COMPUTE_DOMAIN_DRIVER, source("dra-driver", "compute-domain-min-driver")
    assert fact("dra-driver", "compute-domain-max-nodes-per-imex-domain") == MAX_NODES_PER_IMEX_DOMAIN


def test_compute_domains_are_turned_on_against_the_charts_default_only_where_needed() -> None:
    # the chart turns them on by default: a release with only single-node pools must say false
    assert fact("dra-driver", "values-resources-computeDomains-enabled") == {"exists": True, "default": True}
    assert dra_driver.values(SPEC)["resources"]["computeDomains"] == {"enabled": True}
    local = load_spec(REPO / "inventories" / "local")  # DRA pools, none on a multi-node NVLink platform
    assert any(p.uses_dra for p in local.node_pools)
    assert dra_driver.values(local)["resources"]["computeDomains"] == {"enabled": False}


def test_the_role_turns_the_host_imex_service_off_as_the_prerequisites_say() -> None:
    """Upstream's command disables (and stops) the unit, then masks it: the role's tasks, in that order."""
    command = fact("dra-driver", "compute-domain-host-imex-service")
    assert command == ("systemctl disable --now nvidia-imex.service && "
                       "systemctl mask nvidia-imex.service"), source("dra-driver", "compute-domain-host-imex-service")
    tasks = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "tasks" / "imex.yml").read_text())
    steps = [t["ansible.builtin.systemd_service"] for block in tasks for t in block.get("block", [])
             if "ansible.builtin.systemd_service" in t]
    assert [s["name"] for s in steps] == ["nvidia-imex.service"] * 2
    assert steps[0] == {"name": "nvidia-imex.service", "state": "stopped", "enabled": False}  # disable --now
    assert steps[1] == {"name": "nvidia-imex.service", "masked": True}  # then mask


def test_gfds_clique_label_is_the_string_the_drivers_plugin_computes(oracle) -> None:  # type: ignore[no-untyped-def]
    """For the simulated fabric of rack-1, GFD's label (NVIDIA's code) equals the driver's format applied to
    the NVML answer: the canonical UUID string, a dot, the clique ID in decimal."""
    fabric = silicon_of(SPEC)["g-1"].fabric
    assert fabric is not None
    cluster_uuid, clique = fabric
    answer = oracle.node(NodeRequest(gpus=(nvml.gpu_request("GB200", 4, fabric=fabric),), driver_version=DRIVER,
                                     cuda_driver_version=nvml.cuda_driver_version(DRIVER)))
    reported = uuid.UUID(cluster_uuid).bytes  # the 16 bytes of nvmlGpuFabricInfo_t.clusterUuid
    drivers = fact("dra-driver", "compute-domain-clique-format") \
        .replace("<clusterUUID>", str(uuid.UUID(bytes=reported))).replace("<cliqueID>", f"{clique:d}")
    assert answer.labels[fact("device-plugin", "gfd-label-gpu-clique")] == drivers
