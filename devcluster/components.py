"""Command lines of the cluster's processes, in start order."""

from __future__ import annotations

import os
from pathlib import Path

from .layout import HOST, MAX_PROCESS_NODES, REPO, Layout
from .procs import Component

KUEUE_CONFIG = "kueue-config.yaml"
KWOK_CONFIG = "kwok-stages.yaml"
JOBSET_CONFIG = "jobset-config.yaml"
PROCESS_NODES_ENV = "DEVCLUSTER_PROCESS_NODES"
DEFAULT_PROCESS_NODES = 2
TERMINATED_POD_GC_THRESHOLD = int(os.environ.get("DEVCLUSTER_TERMINATED_POD_GC_THRESHOLD", "12500"))
"""Finished pods kept before the controller-manager's PodGC deletes the oldest (12,500: Kubernetes' default).
A 100,000-index Job with fake pods runs at a few pods a second once KWOK tracks tens of thousands of finished
pods; its full-size test restarts the controller-manager with a lower value (the Job controller has counted a
finished pod before PodGC can remove it, so nothing is lost)."""


def process_node_count() -> int:
    """How many process nodes the main cluster runs (``DEVCLUSTER_PROCESS_NODES``, default 2)."""
    raw = os.environ.get(PROCESS_NODES_ENV, str(DEFAULT_PROCESS_NODES))
    try:
        count = int(raw)
    except ValueError:
        count = -1
    if count < 0:
        raise ValueError(f"{PROCESS_NODES_ENV}={raw!r}: give a whole number of process nodes (0 for none)")
    if count > MAX_PROCESS_NODES:
        raise ValueError(
            f"{PROCESS_NODES_ENV}={raw!r}: at most {MAX_PROCESS_NODES} process nodes (more would run into "
            "other components' ports; see Ports.procnode_kubelet in devcluster/layout.py)"
        )
    return count


def process_node_name(number: int) -> str:
    """The Node (and ``procnode-<number>`` component) of process node ``number``."""
    return f"proc-spot-{number}"


def components(bin_dir: Path, layout: Layout, procnode: Path = Path("procnode")) -> list[Component]:
    """The processes of the cluster kept in ``layout`` (a MultiKueue worker has no JobSet controller, no
    Azurite and no process nodes of its own); ``procnode`` is the process node binary (build_procnode.sh)."""
    pki = layout.pki
    ports = layout.ports
    kc = str(layout.kubeconfig)
    etcd_url = f"http://{HOST}:{ports.etcd_client}"
    azurite = REPO / "devcluster" / "node_modules" / ".bin" / "azurite-blob"
    return [
        Component(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--name=devcluster",
                f"--data-dir={layout.etcd_data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://{HOST}:{ports.etcd_peer}",
                f"--initial-advertise-peer-urls=http://{HOST}:{ports.etcd_peer}",
                f"--initial-cluster=devcluster=http://{HOST}:{ports.etcd_peer}",
                f"--listen-metrics-urls=http://{HOST}:{ports.etcd_metrics}",
                # A throwaway test cluster: skip fsync, keep the database small.
                "--unsafe-no-fsync=true",
                # 8 GiB: benchmarks/watch_flood.py holds 5,000 Jobs of 200 KiB
                "--quota-backend-bytes=8589934592",
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=5m",
                "--log-level=warn",
            ],
            f"{etcd_url}/health",
        ),
        Component(
            "kube-apiserver",
            [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={ports.apiserver}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=Node,RBAC",
                # The aggregator (Kueue's visibility API) authenticates to extension servers as this client.
                f"--requestheader-client-ca-file={pki / 'ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                # There is no kube-proxy: do not publish 127.0.0.1 as the kubernetes Service's endpoint.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--v=1",
            ],
            f"https://{HOST}:{ports.apiserver}/readyz",
        ),
        Component(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                f"--bind-address={HOST}",
                f"--secure-port={ports.controller_manager}",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--controllers=*",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-job-syncs=10",
                f"--terminated-pod-gc-threshold={TERMINATED_POD_GC_THRESHOLD}",
                "--v=1",
            ],
            f"https://{HOST}:{ports.controller_manager}/healthz",
        ),
        Component(
            "kube-scheduler",
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                f"--bind-address={HOST}",
                f"--secure-port={ports.scheduler}",
                "--leader-elect=false",
                "--v=1",
            ],
            f"https://{HOST}:{ports.scheduler}/healthz",
        ),
        Component(
            "kwok",
            [
                str(bin_dir / "kwok"),
                f"--kubeconfig={kc}",
                f"--config={layout.kwok / KWOK_CONFIG}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--server-address={HOST}:{ports.kwok}",
                "--cidr=10.0.0.1/16",
                "--node-ip=10.254.0.1",
                "--node-lease-duration-seconds=40",
            ],
            f"http://{HOST}:{ports.kwok}/healthz",
        ),
        Component(
            "kueue",
            [str(bin_dir / "kueue"), f"--config={layout.kueue / KUEUE_CONFIG}", f"--kubeconfig={kc}"],
            f"http://{HOST}:{ports.kueue_health}/readyz",
            cwd=layout.kueue,
        ),
    ] + (
        []
        if layout.is_worker
        else [  # in start order: the process nodes come right after KWOK's nodes
            *(_procnode(procnode, layout, n) for n in range(process_node_count())),
            _jobset(bin_dir, layout),
            _azurite(azurite, layout),
        ]
    )


def _procnode(binary: Path, layout: Layout, number: int) -> Component:
    """Process node ``number``: a Node whose pods run as local processes (docs/process-node.md)."""
    return Component(
        f"procnode-{number}",
        [
            str(binary),
            f"--kubeconfig={layout.kubeconfig}",
            f"--node-name={process_node_name(number)}",
            f"--state-dir={layout.procnode}",
            f"--repo={REPO}",
            f"--health-addr={HOST}:{layout.ports.procnode_health + number}",
            # the kubelet API (container logs): published in the Node, the API server's pods/log goes there
            f"--kubelet-port={layout.ports.procnode_kubelet + number}",
            "--cpu=4",
            "--memory=16Gi",
            "--pods=32",
        ],
        f"http://{HOST}:{layout.ports.procnode_health + number}/healthz",
        cwd=layout.procnode,
    )


def _jobset(bin_dir: Path, layout: Layout) -> Component:
    """The JobSet controller (main cluster only); its webhook, metrics and health addresses are in its
    config file."""
    return Component(
        "jobset",
        [
            str(bin_dir / "jobset-controller"),
            f"--config={layout.jobset / JOBSET_CONFIG}",
            f"--kubeconfig={layout.kubeconfig}",
            "--zap-devel=false",
        ],
        f"http://{HOST}:{layout.ports.jobset_health}/readyz",
        cwd=layout.jobset,
    )


def _azurite(azurite: Path, layout: Layout) -> Component:
    return Component(
        "azurite",
        [
            str(azurite),
            f"--blobHost={HOST}",
            f"--blobPort={layout.ports.azurite_blob}",
            f"--location={layout.azurite}",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ],
        f"tcp://{HOST}:{layout.ports.azurite_blob}",
    )
