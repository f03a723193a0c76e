"""Test-side access to the bed's process nodes (``proc-spot-N``, pods run as local processes).

See docs/process-node.md. A ResourceFlavor from :func:`process_flavor` puts a Job's pods there; the node's
pod directory holds each container's log, its journal says what really ran when.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from devcluster.layout import Layout

from .cluster import Cluster, KueueEnv, delete_kueue_env, is_true, short_id, wait_for

NODE_KIND_LABEL = "airflow-kueue.io/node-kind"
PROCESS_NODE_LABEL = {NODE_KIND_LABEL: "process"}
"""The label every process node carries (and only they): a nodeSelector or ResourceFlavor nodeLabels."""
PROCESS_NODE_SELECTOR = f"{NODE_KIND_LABEL}=process"
PROCESS_TOLERATIONS = [
    {"key": "airflow-kueue.io/process-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    },
]
"""Tolerations for both taints of a process node (no other pod of the bed lands there)."""


def process_flavor(name: str) -> dict[str, Any]:
    """A Kueue ResourceFlavor ``name`` selecting the process nodes, tolerating their taints."""
    return {
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {
            "nodeLabels": dict(PROCESS_NODE_LABEL),
            "tolerations": [dict(t) for t in PROCESS_TOLERATIONS],
        },
    }


def process_nodes(cluster: Cluster) -> list[str]:
    """The names of the process nodes the cluster has now, sorted."""
    nodes = cluster.core.list_node(label_selector=PROCESS_NODE_SELECTOR).items
    return sorted(n.metadata.name for n in nodes)


def state_dir() -> Path:
    """``.devcluster/procnode/`` (or under ``DEVCLUSTER_STATE``)."""
    return Layout.default().procnode


def pod_dir(pod: str | Mapping[str, Any], *, node: str | None = None, uid: str | None = None) -> Path:
    """The directory a process node ran ``pod`` in (cwd and HOME of its containers, their logs).

    ``pod`` is ``"namespace/name"`` or a pod as a dict (its namespace, name, uid and node are used); with
    several runs of the same name (a recreated pod) ``uid`` picks one, else the latest is returned."""
    if isinstance(pod, Mapping):
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        namespace, name = meta["namespace"], meta["name"]
        uid = uid or meta.get("uid")
        node = node or spec.get("nodeName") or spec.get("node_name")
    else:
        namespace, sep, name = pod.partition("/")
        if not sep:
            raise ValueError(f"pod {pod!r}: give 'namespace/name' or the pod object")
    nodes = [node] if node else sorted(p.name for p in state_dir().iterdir() if p.is_dir())
    found = [
        d
        for n in nodes
        for d in (state_dir() / n / "pods").glob(f"{namespace}_{name}_*")
        if d.name.rsplit("_", 1)[1] and (uid is None or d.name.endswith(f"_{uid[:8]}"))
    ]
    if not found:
        raise FileNotFoundError(
            f"no process-node directory for pod {namespace}/{name} (node {node}, uid {uid})"
        )
    return max(found, key=lambda d: d.stat().st_mtime)


def pod_log(
    pod: str | Mapping[str, Any], container: str, *, node: str | None = None, uid: str | None = None
) -> str:
    """What ``container`` of ``pod`` wrote to stdout and stderr ("" before it started, also while the node
    has not made the pod's directory yet: a pod is bound before its node starts it)."""
    try:
        log = pod_dir(pod, node=node, uid=uid) / f"{container}.log"
    except FileNotFoundError:
        return ""
    return log.read_text(errors="replace") if log.exists() else ""


def journal(node: str) -> list[dict[str, Any]]:
    """Every event node ``node`` recorded, oldest first: ``{"t", "event": "start"|"signal"|"exit", "pod",
    "uid", "container", "job", "index", "cpu"}`` plus ``"signal"`` or ``"exit_code"``."""
    path = state_dir() / node / "journal.jsonl"
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:  # a line being written right now
            continue
    return events


def process_queues(cluster: Cluster, test_name: str, *, cpu: str = "1", memory: str = "8Gi") -> KueueEnv:
    """A namespace, a ResourceFlavor over the process nodes, a ClusterQueue of ``cpu`` that preempts lower
    priorities for higher ones, and LocalQueue ``lq``; delete with ``cluster.delete_kueue_env``."""
    sid = short_id()
    slug = "".join(c if c.isalnum() else "-" for c in test_name.lower()).strip("-")[:36].strip("-")
    namespace, flavor, cq = f"t-{slug}-{sid}", f"rf-proc-{sid}", f"cq-proc-{sid}"
    cluster.core.create_namespace({"metadata": {"name": namespace, "labels": {"devcluster/test": "true"}}})
    cluster.kueue_create("resourceflavors", process_flavor(flavor))
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    spec = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": resources}]}
        ],
    }
    cluster.kueue_create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec})
    cluster.kueue_create(
        "localqueues",
        {
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
        namespace=namespace,
    )
    wait_for(
        f"LocalQueue lq in {namespace} active",
        lambda: is_true(cluster.kueue_get("localqueues", "lq", namespace), "Active"),
        timeout=30,
    )
    return KueueEnv(cluster, namespace, flavor, cq, "lq")


@pytest.fixture(name="queues")
def queues_on_process_nodes(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[KueueEnv]:
    """``process_queues`` of 1 CPU for the test, deleted after it (import it as the fixture ``queues``)."""
    env = process_queues(cluster, request.node.name, cpu="1")
    yield env
    delete_kueue_env(env)
