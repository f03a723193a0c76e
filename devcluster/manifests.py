"""Manifests and configuration files the local cluster applies or hands to its processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from .fake_pod_lengths import RUN_DURATION_EXPRESSION
from .layout import DEVCLUSTER_SRC, HOST, PORTS, Ports

KUEUE_NAMESPACE = "kueue-system"

# jq over a pod: true when its completion index is listed in kwok.airflow-kueue.io/fail-indexes (an interval
# string such as "3,7,10-12") and, if kwok.airflow-kueue.io/fail-times is set, the index has failed fewer
# times than that so far.  Used by the pod-complete (false) and pod-fail (true) stages.
FAIL_INDEX_SELECTOR = (
    ".metadata.annotations as $a"
    ' | ($a["batch.kubernetes.io/job-completion-index"] // "") as $i'
    ' | ($a["kwok.airflow-kueue.io/fail-indexes"] // "") as $f'
    ' | ($a["kwok.airflow-kueue.io/fail-times"] // "") as $t'
    ' | ($a["batch.kubernetes.io/job-index-failure-count"] // "0" | tonumber) as $tries'
    ' | if $f == "" or $i == "" then false'
    " else ($i | tonumber) as $n"
    ' | ([$f | split(",")[] | select(. != "") | split("-") | map(tonumber)'
    " | if length == 1 then .[0] == $n else (.[0] <= $n and $n <= .[1]) end] | any)"
    ' and ($t == "" or $tries < ($t | tonumber))'
    " end"
)

# A pod annotated ``kwok.airflow-kueue.io/hold: "true"`` stays Running until a test patches the annotation, so
# "X is still running when Y happens" never depends on how fast the machine is.
HOLD_ANNOTATION = "kwok.airflow-kueue.io/hold"
HOLD_SELECTOR = f'(.metadata.annotations["{HOLD_ANNOTATION}"] // "false") == "true"'
# A pod annotated ``kwok.airflow-kueue.io/image-pull: "fail"`` stays Pending in ImagePullBackOff.
PULL_FAIL_ANNOTATION = "kwok.airflow-kueue.io/image-pull"
PULL_FAIL_SELECTOR = f'(.metadata.annotations["{PULL_FAIL_ANNOTATION}"] // "") == "fail"'
# A pod told to stop (deleted, evicted) fails at once, unless annotated ``kwok.airflow-kueue.io/grace-exit``
# with a Go duration: it then ends Succeeded (exit 0) that long after the annotation, as a worker-SDK pod does
# whose released shards the Job's other pods finish within its grace; "fail" ends it Failed after all.
GRACE_EXIT_ANNOTATION = "kwok.airflow-kueue.io/grace-exit"
GRACE_EXIT_SELECTOR = (
    f'(.metadata.annotations["{GRACE_EXIT_ANNOTATION}"] // "") as $g'
    ' | if $g == "" then "none" elif $g == "fail" then "fail" else "exit" end'
)


def kwok_stages() -> str:
    text = (DEVCLUSTER_SRC / "manifests" / "kwok-stages.yaml").read_text()
    for marker, selector in (
        ("'@FAIL_INDEX_SELECTOR@'", FAIL_INDEX_SELECTOR),
        ("'@HOLD_SELECTOR@'", HOLD_SELECTOR),
        ("'@PULL_FAIL_SELECTOR@'", PULL_FAIL_SELECTOR),
        ("'@GRACE_EXIT_SELECTOR@'", GRACE_EXIT_SELECTOR),
        ("'@GRACE_EXIT@'", f'.metadata.annotations["{GRACE_EXIT_ANNOTATION}"]'),
        ("'@RUN_DURATION@'", RUN_DURATION_EXPRESSION),
    ):
        text = text.replace(marker, json.dumps(selector))
    return text


KUEUE_FEATURE_GATES_ENV = "DEVCLUSTER_KUEUE_FEATURE_GATES"
"""``Name=false,Other=true``: Kueue feature gates for a benchmark's anchor run (``ReclaimablePods=false``);
unset in every test run. ``devcluster up`` restarts Kueue when they change."""


def kueue_feature_gates(raw: str | None) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in (raw or "").split(","):
        if item.strip():
            name, _, value = item.partition("=")
            if value.strip().lower() not in ("true", "false"):
                raise ValueError(f"{KUEUE_FEATURE_GATES_ENV}: {item!r} is not Name=true or Name=false")
            gates[name.strip()] = value.strip().lower() == "true"
    return gates


def kueue_config(
    webhook_cert_dir: Path,
    ports: Ports = PORTS,
    feature_gates: dict[str, bool] | None = None,
    visibility_server: bool = True,
) -> str:
    """Kueue's Configuration. ``visibility_server=False``: a release older than v0.17, whose Configuration has
    no ``visibilityServer`` (strict decoding refuses it) and whose visibility server binds every address on
    port 8082, which the main bed's Kueue holds: the on-demand visibility API is turned off there (the
    provider treats it as optional)."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{HOST}:{ports.kueue_health}"},
        "metrics": {"bindAddress": f"{HOST}:{ports.kueue_metrics}"},
        "webhook": {"host": HOST, "port": ports.kueue_webhook, "certDir": str(webhook_cert_dir)},
        "leaderElection": {"leaderElect": False},
        # Kueue makes its own CA and injects it into the webhook configurations, CRDs and the secret, as it
        # does in a cluster.  The apiserver reaches it through ExternalName Services that point at localhost.
        "internalCertManagement": {"enable": True},
        "visibilityServer": {"bindAddress": HOST, "bindPort": ports.kueue_visibility},
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
        # Fair sharing between the ClusterQueues of a cohort (tree): preemption evens out borrowing
        # (reason InCohortFairSharing) and each ClusterQueue reports its weighted share. Kueue's defaults.
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "clientConnection": {"qps": 200, "burst": 400},
    }
    gates = dict(feature_gates or {})
    if not visibility_server:
        del config["visibilityServer"]
        gates.setdefault("VisibilityOnDemand", False)
    if gates:
        config["featureGates"] = gates
    return yaml.safe_dump(config, sort_keys=False)


def has_visibility_server_config(kueue_src: Path) -> bool:
    """Whether this Kueue release's Configuration has ``visibilityServer`` (v0.17 and later), read from its
    source tree rather than from a version table."""
    types = kueue_src / "apis" / "config" / "v1beta2" / "configuration_types.go"
    return types.exists() and "VisibilityServer" in types.read_text()


def _kustomized(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    """The documents of a kustomization, rendered offline by ``kubectl kustomize``."""
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], check=True, capture_output=True, text=True
    ).stdout
    return list(yaml.safe_load_all(rendered))


def _is_served_webhook(hook: dict[str, Any]) -> bool:
    """Keep the webhooks of the frameworks this cluster enables: batch/v1 Jobs, JobSets, Kueue's own kinds."""
    path = hook.get("clientConfig", {}).get("service", {}).get("path", "")
    return any(part in path for part in ("batch-v1-job", "jobset-x-k8s-io", "kueue-x-k8s-io"))


KUEUE_API_ENV = "DEVCLUSTER_KUEUE_API"
"""Which ``kueue.x-k8s.io`` versions the bed serves: ``v1beta2`` (the default: Kueue v0.20's API surface,
v1beta1 unserved, no v1beta1 visibility APIService) or ``both`` (Kueue 0.19.2 as it ships).
See docs/kueue-versions.md."""
KUEUE_API_MODES = ("v1beta2", "both")
KUEUE_GROUP = "kueue.x-k8s.io"
VISIBILITY_V1BETA1 = "v1beta1.visibility.kueue.x-k8s.io"
VISIBILITY_SERVICE = "kueue-visibility-server"


class KueueApiModeError(ValueError):
    """``DEVCLUSTER_KUEUE_API`` names no mode the bed knows."""


def kueue_api_mode(raw: str | None) -> str:
    """The mode from the environment's value; unset or empty is ``v1beta2``."""
    mode = (raw or "").strip() or KUEUE_API_MODES[0]
    if mode not in KUEUE_API_MODES:
        raise KueueApiModeError(
            f"{KUEUE_API_ENV}={raw!r}: use one of {', '.join(KUEUE_API_MODES)} "
            "(v1beta2: v1beta1 unserved as in Kueue v0.20; both: Kueue 0.19.2 as it ships)"
        )
    return mode


def kueue_stale_objects(api: str) -> list[tuple[str, str]]:
    """(resource, name) pairs a re-apply in mode ``api`` must delete: server-side apply adds and changes
    objects but never removes one that an earlier mode applied."""
    return [("apiservice", VISIBILITY_V1BETA1)] if api == "v1beta2" else []


def _serve_v1beta2_only(crd: dict[str, Any]) -> None:
    """As Kueue v0.20's CRDs (kubernetes-sigs/kueue#14558): v1beta1 stays listed (objects stored as v1beta1
    still decode) but is not served; v1beta2 is served and the storage version. The conversion webhook
    stays."""
    for version in crd["spec"]["versions"]:
        version["served"] = version["storage"] = version["name"] == "v1beta2"


def kueue_install(
    kubectl: Path,
    kueue_src: Path,
    ports: Ports,  # the cluster's own (a side bed's or a worker's are shifted): no default to forget
    api: str = KUEUE_API_MODES[0],
    visibility: bool = True,
) -> list[dict[str, Any]]:
    """Kueue's own ``config/default`` kustomization, rewired for a controller that runs on the host.

    - the Deployment goes (Kueue runs as a local process);
    - the webhook and visibility Services become ExternalName Services for ``localhost`` with the local ports,
      so the apiserver's service resolver dials 127.0.0.1 with the in-cluster TLS server name;
    - webhooks of frameworks that are not enabled are dropped (nothing would answer them);
    - with ``api="v1beta2"``, Kueue v0.20's API surface: every ``kueue.x-k8s.io`` CRD serves v1beta2 only and
      the v1beta1 visibility APIService is left out (delete a stale one: ``kueue_stale_objects``);
    - ``visibility=False`` (a release older than v0.17, ``kueue_config``): no visibility APIService, no
      visibility Service.
    """
    kueue_api_mode(api)
    docs: list[dict[str, Any]] = []
    for doc in _kustomized(kubectl, kueue_src / "config" / "default"):
        if not doc:
            continue
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "Deployment":
            continue
        if api == "v1beta2" and (kind, name) == ("APIService", VISIBILITY_V1BETA1):
            continue
        if not visibility and (kind == "APIService" or (kind, name) == ("Service", VISIBILITY_SERVICE)):
            continue
        if kind == "Service" and name in ("kueue-webhook-service", VISIBILITY_SERVICE):
            port = ports.kueue_webhook if name == "kueue-webhook-service" else ports.kueue_visibility
            doc["spec"] = {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            }
        elif kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            doc["webhooks"] = [h for h in doc["webhooks"] if _is_served_webhook(h)]
            for hook in doc["webhooks"]:
                hook["clientConfig"]["service"]["port"] = ports.kueue_webhook
        elif kind == "CustomResourceDefinition":
            if api == "v1beta2" and doc["spec"]["group"] == KUEUE_GROUP:
                _serve_v1beta2_only(doc)
            conversion = doc["spec"].get("conversion", {})
            if conversion.get("strategy") == "Webhook":
                conversion["webhook"]["clientConfig"]["service"]["port"] = ports.kueue_webhook
        elif kind == "APIService":
            doc["spec"]["service"]["port"] = ports.kueue_visibility
        docs.append(doc)
    return docs


JOBSET_NAMESPACE = "jobset-system"
JOBSET_API_KINDS = ("Namespace", "CustomResourceDefinition")
JOBSET_KINDS = (
    "Namespace",
    "CustomResourceDefinition",
    "Service",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)


def jobset_config(cert_dir: Path, ports: Ports = PORTS) -> str:
    """The JobSet controller's Configuration: local addresses, no leader election, and the bed's own webhook
    certificate (its internal cert rotator writes to a fixed /tmp path that clusters on one host would
    share)."""
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"{HOST}:{ports.jobset_health}"},
        "metrics": {"bindAddress": f"{HOST}:{ports.jobset_metrics}", "certDir": str(cert_dir)},
        "webhook": {"host": HOST, "port": ports.jobset_webhook, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 200, "burst": 400},
    }
    return yaml.safe_dump(config, sort_keys=False)


def jobset_install(
    kubectl: Path, jobset_src: Path, ca_bundle: str, ports: Ports, api_only: bool = False
) -> list[dict[str, Any]]:
    """JobSet's own ``config/default`` kustomization for a controller on the host: its namespace, CRD and
    webhooks, the webhook Service as an ExternalName for ``localhost`` (as for Kueue), the bed's CA in the
    webhook configurations; no Deployment, RBAC (the controller uses the admin kubeconfig), cert Secret or
    metrics Service. The CRD has one version, so it needs no conversion webhook. ``api_only``: the namespace
    and CRD alone, for a MultiKueue worker (the manager's Kueue watches JobSets there once its JobSet
    integration is on, and counts a worker without the API as not connected)."""
    docs: list[dict[str, Any]] = []
    for doc in _kustomized(kubectl, jobset_src / "config" / "default"):
        if not doc or doc["kind"] not in (JOBSET_API_KINDS if api_only else JOBSET_KINDS):
            continue
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "Service":
            if name != "jobset-webhook-service":
                continue
            doc["spec"] = {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"name": "https", "port": ports.jobset_webhook, "protocol": "TCP"}],
            }
        elif kind == "CustomResourceDefinition":
            doc["spec"]["conversion"] = {"strategy": "None"}
            doc["metadata"].get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
        elif kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            doc["metadata"].get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
            for hook in doc["webhooks"]:
                hook["clientConfig"]["service"]["port"] = ports.jobset_webhook
                hook["clientConfig"]["caBundle"] = ca_bundle
        docs.append(doc)
    return docs


# The seed's AKS pools.  Labels and taints are what AKS puts on Spot and system nodes.
SPOT_POOL = {
    "prefix": "aks-spot",
    "instance_type": "Standard_D16ds_v5",
    "cpu": "16",
    "memory": "64Gi",
    "labels": {
        "workload": "batch",
        "tier": "spot",
        "kubernetes.azure.com/scalesetpriority": "spot",
        "kubernetes.azure.com/agentpool": "spot",
        "kubernetes.azure.com/mode": "user",
    },
    "taints": [{"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}],
}
SYSTEM_POOL = {
    "prefix": "aks-system",
    "instance_type": "Standard_D4ds_v5",
    "cpu": "4",
    "memory": "16Gi",
    "labels": {
        "workload": "system",
        "tier": "on-demand",
        "kubernetes.azure.com/agentpool": "system",
        "kubernetes.azure.com/mode": "system",
    },
    "taints": [],
}


ZONE_LABEL = "topology.kubernetes.io/zone"
PLACEMENT_GROUP_LABEL = "topology.airflow-kueue.io/placement-group"
"""A rack-like level between zone and node (AKS has none; a proximity placement group is the closest)."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
TOPOLOGY_NAME = "aks-zones"
"""The bed's Kueue ``Topology``: zone -> placement group -> node, for topology-aware ResourceFlavors."""


def topology(name: str = TOPOLOGY_NAME) -> dict[str, Any]:
    levels = [{"nodeLabel": label} for label in (ZONE_LABEL, PLACEMENT_GROUP_LABEL, HOSTNAME_LABEL)]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": levels},
    }


def fake_node(
    name: str,
    pool: dict[str, Any],
    zone: int = 1,
    extra_labels: dict[str, str] | None = None,
    group: int = 0,
) -> dict[str, Any]:
    """A KWOK-managed Node shaped like one VM of ``pool``, in ``zone`` and placement ``group`` of it."""
    labels = {
        "type": "kwok",
        HOSTNAME_LABEL: name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool["instance_type"],
        "topology.kubernetes.io/region": "westeurope",
        ZONE_LABEL: f"westeurope-{zone}",
        PLACEMENT_GROUP_LABEL: f"westeurope-{zone}-pg{group}",
        **pool["labels"],
        **(extra_labels or {}),
    }
    resources = {"cpu": pool["cpu"], "memory": pool["memory"], "pods": "110", "ephemeral-storage": "256Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": list(pool["taints"])},
        "status": {"allocatable": resources, "capacity": resources},
    }


def pool_nodes(spot: int, system: int) -> list[dict[str, Any]]:
    nodes = [
        fake_node(f"{SPOT_POOL['prefix']}-{i:06d}", SPOT_POOL, zone=1 + i % 3, group=i // 3 % 2)
        for i in range(spot)
    ]
    nodes += [
        fake_node(f"{SYSTEM_POOL['prefix']}-{i:06d}", SYSTEM_POOL, zone=1 + i % 3) for i in range(system)
    ]
    return nodes
