"""A real local Kubernetes + Kueue control plane run as plain processes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the KWOK controller (fake nodes and pod
lifecycles), the Kueue controller with its webhooks and visibility API, and Azurite.  Binaries are built from
upstream Go modules by ``build.sh`` and cached outside the repository.
Usage: ``python -m devcluster up|down|status``; ``python -m devcluster multikueue up`` adds MultiKueue worker
clusters (``multikueue.py``).
"""
