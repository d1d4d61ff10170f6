"""The local world: a real Kubernetes control plane on 127.0.0.1 with kwok standing in for kubelets.

:mod:`.world` starts and stops it: :mod:`.components` says what each of its processes is, :mod:`.runtime`
runs them (and the add-ons', recorded by :mod:`.addons`). :mod:`.crds` installs the operators' CRDs,
:mod:`.stages` holds kwok's node/pod behaviour.
"""
