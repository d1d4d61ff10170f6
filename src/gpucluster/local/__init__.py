"""The local world: a real Kubernetes control plane on 127.0.0.1 with kwok standing in for kubelets.

:mod:`.world` starts and stops it, :mod:`.crds` installs the operators' CRDs, :mod:`.stages` holds
kwok's node/pod behaviour, :mod:`.testing` the pytest fixture helper.
"""
