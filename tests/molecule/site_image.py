"""The Debian packages the site scenario's roles install: ``python tests/molecule/site_image.py`` prints them.

The site scenario's hosts boot an image that already holds them (``scripts/molecule-image.sh --packages``,
one image per list, built once per machine), so its converge and idempotence runs do not download and
unpack them again under every run; the role scenarios (host_prep, container_runtime, kubernetes_node)
still install each from a bare host on every run. Left out: rdma_host's packages, which only the RDMA
pool's host installs (their units would start on every host of the image). The list is read from the
roles' own variables, so a role that changes a package changes the image's key with it. Used by
tests/molecule/conftest.py and scripts/molecule-test.sh.
"""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

#: (role, variables file, variable) for every package list a site host installs from the distribution
#: on every host with the site's settings (containerd and the CNI plugins from Debian; kubeadm, kubelet, kubectl and the
#: NVIDIA Container Toolkit from local folders; the driver left to the GPU Operator).
SOURCES = (
    ("host_prep", "vars/Debian.yml", "host_prep_initramfs_package"),
    ("host_prep", "vars/Debian.yml", "host_prep_timesync_package"),
    ("container_runtime", "vars/Debian.yml", "container_runtime_packages"),
    ("kubernetes_node", "defaults/main.yml", "kubernetes_node_dependencies"),
    ("kubernetes_node", "vars/Debian.yml", "kubernetes_node_cni_package"),
)


def packages() -> list[str]:
    """Every package of :data:`SOURCES`, sorted, once each."""
    found: set[str] = set()
    for role, file, var in SOURCES:
        value = (yaml.safe_load((REPO / "roles" / role / file).read_text()) or {})[var]
        found.update([value] if isinstance(value, str) else value)
    return sorted(found)


if __name__ == "__main__":
    print(",".join(packages()))
