"""MultiKueue on the local bed: worker clusters next to the main one, which becomes their manager.

Each worker is a whole cluster of its own (etcd, kube-apiserver, controller-manager, scheduler, KWOK nodes,
Kueue) with its own state directory and ports (``Layout.worker``). On a worker, ``deploy/rbac/
multikueue-worker.yaml`` makes the identity the manager's Kueue uses there; on the manager, a Secret holds
a kubeconfig with that identity's token, and a MultiKueueCluster per worker, one MultiKueueConfig listing
them in order and an AdmissionCheck (``multikueue``) let a ClusterQueue dispatch its Workloads to them.
A test's ClusterQueue opts in by listing the AdmissionCheck; its namespace and LocalQueue must exist on the
workers too (MultiKueue mirrors nothing of the queue set-up).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from . import procs
from .cluster import Kubectl, bring_up, build_binaries, locked, say, stop_workers
from .layout import HOST, REPO, Layout, worker_name

WORKERS = int(os.environ.get("DEVCLUSTER_MULTIKUEUE_WORKERS", "2"))
WORKER_SPOT_NODES = 2
WORKER_SYSTEM_NODES = 1
ADMISSION_CHECK = "multikueue"
"""The AdmissionCheck a ClusterQueue on the manager lists to dispatch to the workers."""
MULTIKUEUE_CONFIG = "workers"
KUEUE_NAMESPACE = "kueue-system"
WORKER_RBAC = REPO / "deploy" / "rbac" / "multikueue-worker.yaml"
WORKER_IDENTITY_TOKEN = "multikueue-manager-token"


def worker_layouts(manager: Layout, count: int = WORKERS) -> list[Layout]:
    return [manager.worker(n) for n in range(1, count + 1)]


def up(manager: Layout, count: int = WORKERS) -> None:
    """Start ``count`` workers (or reuse them) and wire the manager (the main cluster, which must run)."""
    started = time.monotonic()
    with locked(manager):
        _up(manager, count)
    say(f"multikueue: {count} worker clusters connected in {time.monotonic() - started:.1f}s")


def _up(manager: Layout, count: int) -> None:
    bin_dir = build_binaries()
    manager_kubectl = Kubectl(bin_dir, manager)
    objects = {}
    for worker in worker_layouts(manager, count):
        kubectl = bring_up(worker, bin_dir, WORKER_SPOT_NODES, WORKER_SYSTEM_NODES)
        # The manager's identity on the worker, and a kubeconfig for it kept in the manager's kueue-system.
        kubectl.apply(list(yaml.safe_load_all(WORKER_RBAC.read_text())))
        objects[worker.name] = _manager_objects(worker, _wait_for_token(kubectl, worker))
        manager_kubectl.apply(objects[worker.name])
    manager_kubectl.apply(_dispatch_objects(count))
    for worker in worker_layouts(manager, count):
        _wait_active(manager_kubectl, worker, objects[worker.name])
    manager_kubectl("wait", "--for=condition=Active", f"admissioncheck/{ADMISSION_CHECK}", "--timeout=60s")


def _wait_active(manager_kubectl: Kubectl, worker: Layout, objects: list[dict[str, Any]]) -> None:
    """Until the manager's Kueue is connected to ``worker``. A MultiKueueCluster whose worker was down
    (``multikueue down`` leaves it on the manager) reconnects with a back-off that doubles up to minutes
    (5 s ... 320 s, seen in Kueue's log): if it is not Active soon, it is made again, and a new object
    connects at once. Only then: a healthy one is never touched while other tests use it."""
    cluster = f"multikueuecluster/{worker.name}"
    if manager_kubectl("wait", "--for=condition=Active", cluster, "--timeout=20s", check=False):
        return
    say(f"multikueue: {worker.name} not connected yet (Kueue's reconnect back-off); making it again")
    manager_kubectl("delete", cluster, "--ignore-not-found", "--wait=true")
    manager_kubectl.apply(objects)
    manager_kubectl("wait", "--for=condition=Active", cluster, "--timeout=90s")


def _wait_for_token(kubectl: Kubectl, worker: Layout) -> str:
    """The worker identity's token, once the worker's controller-manager has filled its Secret in."""
    log = worker.logs / "kube-controller-manager.log"
    procs.wait_until(f"{worker.name}: the MultiKueue token", lambda: _token(kubectl) is not None, 60, log)
    return str(_token(kubectl))


def _token(kubectl: Kubectl) -> str | None:
    out = kubectl("get", "secret", "-n", KUEUE_NAMESPACE, WORKER_IDENTITY_TOKEN, "-o", "json", check=False)
    data = (json.loads(out).get("data") or {}) if out else {}
    return base64.b64decode(data["token"]).decode() if data.get("token") else None


def worker_kubeconfig(worker: Layout, token: str) -> str:
    """The kubeconfig the manager's Kueue uses for ``worker``: CA data and a token, nothing from a file
    (Kueue refuses file paths, insecure TLS and exec plugins in MultiKueue kubeconfigs)."""
    ca = base64.b64encode((worker.pki / "ca.crt").read_bytes()).decode()
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": worker.name,
                "cluster": {
                    "server": f"https://{HOST}:{worker.ports.apiserver}",
                    "certificate-authority-data": ca,
                },
            }
        ],
        "users": [{"name": "multikueue-manager", "user": {"token": token}}],
        "contexts": [
            {"name": worker.name, "context": {"cluster": worker.name, "user": "multikueue-manager"}}
        ],
        "current-context": worker.name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def _manager_objects(worker: Layout, token: str) -> list[dict[str, Any]]:
    secret = f"multikueue-{worker.name}"
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": KUEUE_NAMESPACE},
            "stringData": {"kubeconfig": worker_kubeconfig(worker, token)},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": worker.name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
        },
    ]


def _dispatch_objects(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": [worker_name(n) for n in range(1, count + 1)]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": MULTIKUEUE_CONFIG,
                },
            },
        },
    ]


def kubeconfig(manager: Layout, number: int) -> Path:
    """The admin kubeconfig of worker ``number`` (tests use it to set up queues and to look)."""
    return manager.worker(number).kubeconfig


def main(argv: list[str]) -> int:
    """``python -m devcluster multikueue up|down``: start or stop the workers alone (the main cluster's
    ``down`` stops them too, its ``status`` lists them)."""
    if argv == ["up"]:
        up(Layout.default())
        return 0
    if argv == ["down"]:
        stop_workers(Layout.default())
        return 0
    print("usage: python -m devcluster multikueue up|down", flush=True)
    return 2
