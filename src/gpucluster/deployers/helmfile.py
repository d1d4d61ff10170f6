"""The helmfile bundle: ``OUT/helmfile.yaml``, next to the kustomize bundle whose values it uses.

One release per lock entry: chart and exact version from the repository the lock names (an OCI
registry without ``oci://`` and with ``oci: true``; a local chart folder as the chart's path, for
air-gapped sites), ``values: [helm/<r>.values.yaml]`` (relative paths in a helmfile are relative to
it), and ``needs`` from ``after``. helmfile identifies a release by ``[[KUBECONTEXT/]NAMESPACE/]NAME``
and reads a need without a namespace as one in the needing release's own namespace (pkg/state/state.go
``reformat``), so every need names the other release's namespace. Sources:
github.com/helmfile/helmfile@v1.8.0/docs/integrations.md, github.com/helmfile/helmfile@v1.8.0/docs/paths.md,
github.com/helmfile/helmfile@v1.8.0/docs/releases.md.

``helmDefaults`` make each batch wait until its workloads and jobs are ready before the next one
starts (``wait``, ``waitForJobs``), and keep Helm from creating namespaces: the namespaces come
from ``OUT/namespaces`` (``kubectl apply -k OUT/namespaces`` first), with the Pod Security labels
the node agents need. The plain manifests follow with ``kubectl apply -k OUT``.
"""

from __future__ import annotations

from typing import Any

from gpucluster.bundle import dump
from gpucluster.deployers.common import chart_repo
from gpucluster.render import Rendered
from gpucluster.spec.model import ClusterSpec

#: Seconds Helm waits for one release's resources (and jobs) to be ready.
TIMEOUT = 900


def files(spec: ClusterSpec, rendered: Rendered) -> dict[str, str]:
    """Relative path → content: ``helmfile.yaml``."""
    repositories: dict[str, dict[str, Any]] = {}
    releases = []
    namespace = {rel.name: rel.namespace for rel in rendered.releases}
    for rel in rendered.releases:
        repo = chart_repo(rel, spec, "helmfile", local_ok=True)
        if repo.kind == "local":
            chart = f"{repo.url}/{rel.chart}"
        else:
            entry: dict[str, Any] = {"name": repo.name, "url": repo.url}
            if repo.kind == "oci":
                entry = {"name": repo.name, "url": repo.oci_host_path, "oci": True}
            repositories[repo.name] = entry
            chart = f"{repo.name}/{rel.chart}"
        release: dict[str, Any] = {"name": rel.name, "namespace": rel.namespace, "chart": chart,
                                   "version": rel.version, "values": [f"helm/{rel.name}.values.yaml"]}
        if rel.after:
            release["needs"] = [f"{namespace[a]}/{a}" for a in rel.after]
        releases.append(release)
    doc = {"helmDefaults": {"wait": True, "waitForJobs": True, "timeout": TIMEOUT, "createNamespace": False},
           "repositories": [repositories[k] for k in sorted(repositories)],
           "releases": releases}
    if not repositories:
        del doc["repositories"]
    return {"helmfile.yaml": dump(doc)}
